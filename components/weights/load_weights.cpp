#include "components/weights/load_weights.h"

#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/text.h"
#include "components/weights/safetensors.h"

namespace trainyard {

namespace {

torch::ScalarType torch_dtype(SafetensorsDtype dtype) {
  switch (dtype) {
    case SafetensorsDtype::F64:
      return torch::kFloat64;
    case SafetensorsDtype::F32:
      return torch::kFloat32;
    case SafetensorsDtype::F16:
      return torch::kFloat16;
    case SafetensorsDtype::BF16:
      return torch::kBFloat16;
    case SafetensorsDtype::I64:
      return torch::kInt64;
    case SafetensorsDtype::I32:
      return torch::kInt32;
    case SafetensorsDtype::I16:
      return torch::kInt16;
    case SafetensorsDtype::I8:
      return torch::kInt8;
    case SafetensorsDtype::U8:
      return torch::kUInt8;
    case SafetensorsDtype::BOOL:
      return torch::kBool;
  }
  return torch::kFloat32;
}

std::string shape_text(c10::IntArrayRef shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

// "a, b, c and 12 more"
std::string listing(const std::vector<std::string>& names, size_t shown = 8) {
  std::vector<std::string> head(names.begin(),
                                names.begin() + static_cast<long>(std::min(shown, names.size())));
  std::string text = join(head);
  if (names.size() > shown) text += fmt::format(" and {} more", names.size() - shown);
  return text;
}

}  // namespace

std::string WeightsReport::summary() const {
  std::string text = fmt::format("{} tensors loaded", loaded);
  if (!dropped.empty())
    text += fmt::format(", {} not used by this model ({})", dropped.size(), listing(dropped, 3));
  if (head_reset) text += ", classification head initialised afresh";
  if (!missing.empty()) text += fmt::format(", missing: {}", listing(missing));
  if (!unexpected.empty()) text += fmt::format(", unexpected: {}", listing(unexpected));
  if (!mismatched.empty()) text += fmt::format(", other shape: {}", listing(mismatched));
  return text;
}

namespace {

// load_weights and check_weights: the checkpoint's tensors matched to the model's by name and
// shape; with `copy`, the matching ones copied in and an unfit head initialised afresh.
WeightsReport match_weights(Model& model, const std::string& path, bool strict, bool copy) {
  SafetensorsFile file(path);
  std::vector<std::string> names;
  for (const auto& entry : file.entries()) names.push_back(entry.name);
  auto to_model_name = model.checkpoint_names_mapper(names);

  std::map<std::string, torch::Tensor> targets;
  for (const auto& item : model.named_parameters(/*recurse=*/true))
    targets[item.key()] = item.value();
  for (const auto& item : model.named_buffers(/*recurse=*/true)) targets[item.key()] = item.value();

  WeightsReport report;
  std::map<std::string, bool> in_checkpoint;  // loaded or of another shape: not missing
  bool head_unfit = false;
  torch::NoGradGuard no_grad;
  for (const auto& entry : file.entries()) {
    std::string name = to_model_name(entry.name);
    if (name.empty()) {
      report.dropped.push_back(entry.name);
      continue;
    }
    auto target = targets.find(name);
    if (target == targets.end()) {
      report.unexpected.push_back(entry.name);
      continue;
    }
    in_checkpoint[name] = true;
    if (target->second.sizes() != c10::IntArrayRef(entry.shape)) {
      if (model.is_head(name))
        head_unfit = true;
      else
        report.mismatched.push_back(fmt::format("{}: checkpoint {} vs model {}", entry.name,
                                                shape_text(entry.shape),
                                                shape_text(target->second.sizes())));
      continue;
    }
    ++report.loaded;
    if (!copy) continue;
    // A view of the mapped bytes (never written), converted and copied into the parameter.
    auto source = torch::from_blob(const_cast<uint8_t*>(entry.data), entry.shape,
                                   torch::TensorOptions().dtype(torch_dtype(entry.dtype)));
    target->second.copy_(source);
  }
  for (const auto& [name, tensor] : targets) {
    if (in_checkpoint.count(name)) continue;
    if (model.is_head(name))
      head_unfit = true;
    else
      report.missing.push_back(name);
  }
  if (head_unfit) {
    if (copy) model.reset_head();
    report.head_reset = true;
  }
  if (strict &&
      (!report.missing.empty() || !report.unexpected.empty() || !report.mismatched.empty())) {
    std::string message = fmt::format("weights {}: the checkpoint does not fit the model", path);
    if (!report.missing.empty())
      message += fmt::format("; missing from the checkpoint: {}", listing(report.missing));
    if (!report.unexpected.empty())
      message += fmt::format("; not in the model: {}", listing(report.unexpected));
    if (!report.mismatched.empty())
      message += fmt::format("; other shapes: {}", listing(report.mismatched));
    throw UserError(message +
                    ". Check the model options (depth, width, ...) against the checkpoint, or set "
                    "model.strict: false to load what fits");
  }
  return report;
}

}  // namespace

WeightsReport load_weights(Model& model, const std::string& path, bool strict) {
  return match_weights(model, path, strict, /*copy=*/true);
}

WeightsReport check_weights(Model& model, const std::string& path, bool strict) {
  return match_weights(model, path, strict, /*copy=*/false);
}

namespace {
SafetensorsDtype safetensors_dtype(torch::ScalarType dtype) {
  switch (dtype) {
    case torch::kFloat64:
      return SafetensorsDtype::F64;
    case torch::kFloat16:
      return SafetensorsDtype::F16;
    case torch::kBFloat16:
      return SafetensorsDtype::BF16;
    case torch::kInt64:
      return SafetensorsDtype::I64;
    case torch::kInt32:
      return SafetensorsDtype::I32;
    case torch::kInt16:
      return SafetensorsDtype::I16;
    case torch::kInt8:
      return SafetensorsDtype::I8;
    case torch::kUInt8:  // random generators' states
      return SafetensorsDtype::U8;
    case torch::kBool:
      return SafetensorsDtype::BOOL;
    default:
      return SafetensorsDtype::F32;
  }
}
}  // namespace

void save_tensors(const std::string& path, const NamedTensors& named,
                  const std::map<std::string, std::string>& metadata) {
  std::vector<torch::Tensor> keep;  // CPU copies that outlive the write
  std::vector<SafetensorsTensor> tensors;
  for (const auto& [name, t] : named) {
    torch::Tensor cpu = t.detach().to(torch::kCPU).contiguous();
    if (safetensors_dtype(cpu.scalar_type()) == SafetensorsDtype::F32) cpu = cpu.to(torch::kFloat);
    keep.push_back(cpu);
    tensors.push_back({name, safetensors_dtype(cpu.scalar_type()), cpu.sizes().vec(),
                       cpu.data_ptr(), cpu.nbytes()});
  }
  write_safetensors(path, tensors, metadata);
}

std::map<std::string, torch::Tensor> load_tensors(const std::string& path) {
  SafetensorsFile file(path);
  std::map<std::string, torch::Tensor> tensors;
  for (const auto& entry : file.entries())
    tensors[entry.name] = torch::from_blob(const_cast<uint8_t*>(entry.data), entry.shape,
                                           torch::TensorOptions().dtype(torch_dtype(entry.dtype)))
                              .clone();
  return tensors;
}

void save_weights(const Model& model, const std::string& path) {
  NamedTensors tensors;
  for (const auto& item : model.named_parameters(true))
    tensors.emplace_back(item.key(), item.value());
  for (const auto& item : model.named_buffers(true)) tensors.emplace_back(item.key(), item.value());
  save_tensors(path, tensors, {{"format", "pt"}, {"written_by", "trainyard"}});
}

}  // namespace trainyard
