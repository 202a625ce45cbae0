#include "components/models/torchscript.h"

#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/script.h>

#include "common/files.h"
#include "common/text.h"

namespace trainyard {

namespace {

const char* const kScriptIt =
    "save it from Python with torch.jit.save(torch.jit.script(model), PATH)";

torch::jit::Module load_archive(const std::string& path) {
  try {
    return torch::jit::load(path, torch::kCPU);
  } catch (const std::exception& e) {
    throw UserError(fmt::format("model.file: '{}' is not a TorchScript archive ({}); {}", path,
                                error_summary(e.what()), kScriptIt));
  }
}

// "forward(Tensor x) -> Tensor", as the user would read it: the schema without `self`.
std::string signature_of(const c10::FunctionSchema& schema) {
  std::vector<std::string> arguments;
  for (size_t i = 1; i < schema.arguments().size(); ++i) {
    const auto& a = schema.arguments()[i];
    arguments.push_back(
        fmt::format("{} {}{}", a.type()->str(), a.name(), a.default_value() ? "=..." : ""));
  }
  std::vector<std::string> returns;
  for (const auto& r : schema.returns()) returns.push_back(r.type()->str());
  const std::string returned =
      returns.size() == 1 ? returns[0] : fmt::format("({})", join(returns, ", "));
  return fmt::format("forward({}) -> {}", join(arguments, ", "), returned);
}

bool is_tensor(const c10::TypePtr& type) { return type->kind() == c10::TypeKind::TensorType; }
bool is_optional_tensor(const c10::TypePtr& type) {
  if (const auto optional = type->cast<c10::OptionalType>())
    return is_tensor(optional->getElementType());
  return false;
}

// The forward's problem with `input`, or "" when it takes what the datasets give and returns one
// tensor. Arguments with defaults past the ones given are allowed.
std::string check_signature(const torch::jit::Module& module, const std::string& input) {
  const auto method = module.find_method("forward");
  if (!method) return "the module has no forward method";
  const c10::FunctionSchema& schema = method->function().getSchema();
  const auto& args = schema.arguments();  // args[0] is self
  const size_t wanted = input == "images" ? 1 : 2;
  const std::string expected = input == "images"
                                   ? "forward(Tensor images) -> Tensor"
                                   : "forward(Tensor input_ids, Tensor attention_mask) -> Tensor";
  bool ok = args.size() >= wanted + 1 && schema.returns().size() == 1 &&
            is_tensor(schema.returns()[0].type()) && is_tensor(args[1].type());
  if (ok && wanted == 2) ok = is_tensor(args[2].type()) || is_optional_tensor(args[2].type());
  for (size_t i = wanted + 1; ok && i < args.size(); ++i) ok = args[i].default_value().has_value();
  if (ok) return "";
  return fmt::format("its forward is {}; model.input: {} needs {}", signature_of(schema), input,
                     expected);
}

// Ops whose behaviour depends on train/eval mode, and which of their inputs says which mode.
const std::map<std::string, size_t>& mode_dependent_ops() {
  static const std::map<std::string, size_t> ops = {{"aten::batch_norm", 5},
                                                    {"aten::instance_norm", 5},
                                                    {"aten::dropout", 2},
                                                    {"aten::dropout_", 2},
                                                    {"aten::feature_dropout", 2},
                                                    {"aten::feature_dropout_", 2},
                                                    {"aten::alpha_dropout", 2},
                                                    {"aten::alpha_dropout_", 2},
                                                    {"aten::feature_alpha_dropout", 2},
                                                    {"aten::feature_alpha_dropout_", 2},
                                                    {"aten::native_dropout", 2},
                                                    {"aten::rrelu", 3}};
  return ops;
}

bool is_none(torch::jit::Value* value) {
  return value->node()->kind() == c10::prim::Constant &&
         value->type()->kind() == c10::TypeKind::NoneType;
}

// torch.jit.trace records the ops one call ran, with the module's training flag of that call
// written in as a constant: such a module behaves the same in training and evaluation. A scripted
// module reads `self.training` instead. So a module is taken as traced when its forward (every call
// inlined) never reads `training` and has a mode-dependent op whose flag is a constant — not a
// normalisation without running statistics (InstanceNorm's default, BatchNorm with
// track_running_stats=False), whose flag is a constant in scripts too and means the same in both
// modes. Returns those ops ("aten::batch_norm (training frozen to true)"), or nothing.
std::vector<std::string> frozen_mode_ops(const torch::jit::Module& module) {
  std::shared_ptr<torch::jit::Graph> graph = module.get_method("forward").graph()->copy();
  torch::jit::Inline(*graph);
  std::set<std::string> found;
  bool reads_training = false;
  std::function<void(torch::jit::Block*)> visit = [&](torch::jit::Block* block) {
    for (torch::jit::Node* node : block->nodes()) {
      for (torch::jit::Block* inner : node->blocks()) visit(inner);
      if (node->kind() == c10::prim::GetAttr && node->s(c10::attr::name) == "training")
        reads_training = true;
      const auto op = mode_dependent_ops().find(node->kind().toQualString());
      if (op == mode_dependent_ops().end() || node->inputs().size() <= op->second) continue;
      torch::jit::Value* flag = node->inputs()[op->second];
      if (flag->node()->kind() != c10::prim::Constant) continue;
      const bool normalisation =
          op->first == "aten::batch_norm" || op->first == "aten::instance_norm";
      if (normalisation && is_none(node->inputs()[3])) continue;  // no running mean to use
      const std::optional<c10::IValue> value = torch::jit::toIValue(flag);
      const std::string mode =
          value && value->isBool() ? (value->toBool() ? "true" : "false") : "a constant";
      found.insert(fmt::format("{} (training frozen to {})", op->first, mode));
    }
  };
  visit(graph->block());
  if (reads_training) return {};
  return {found.begin(), found.end()};
}

// The rows of the embedding that reads input_ids directly: the vocabulary the module accepts, or 0
// when no such embedding is found (then validation cannot compare it with the dataset's).
int64_t token_embedding_rows(const torch::jit::Module& module) {
  std::shared_ptr<torch::jit::Graph> graph = module.get_method("forward").graph()->copy();
  torch::jit::Inline(*graph);
  torch::jit::Value* input_ids = graph->inputs().size() > 1 ? graph->inputs()[1] : nullptr;
  for (torch::jit::Node* node : graph->nodes()) {
    if (node->kind() != c10::Symbol::fromQualString("aten::embedding") ||
        node->inputs()[1] != input_ids)
      continue;
    // The weight: a chain of prim::GetAttr from self (tokens.weight, encoder.embed.weight, ...).
    std::vector<std::string> path;
    torch::jit::Value* value = node->inputs()[0];
    while (value->node()->kind() == c10::prim::GetAttr) {
      path.insert(path.begin(), value->node()->s(c10::attr::name));
      value = value->node()->inputs()[0];
    }
    if (value != graph->inputs()[0] || path.empty()) return 0;
    c10::IValue current = module._ivalue();
    for (const std::string& name : path) {
      if (!current.isObject() || !current.toObjectRef().type()->hasAttribute(name)) return 0;
      current = current.toObjectRef().getAttr(name);
    }
    return current.isTensor() && current.toTensor().dim() == 2 ? current.toTensor().size(0) : 0;
  }
  return 0;
}

// The trial batch of validation: two samples of the configured size.
std::vector<c10::IValue> trial_inputs(const TorchScriptOptions& o, int64_t vocab_rows) {
  if (o.input == "images") return {torch::zeros({2, 3, o.image_size, o.image_size})};
  const int64_t length = std::min<int64_t>(8, o.max_positions);
  const int64_t top_id = vocab_rows > 0 ? vocab_rows - 1 : 1;
  torch::Tensor ids = torch::full({2, length}, top_id, torch::kLong);
  return {ids, torch::ones({2, length}, torch::kLong)};
}

std::string trial_shape(const TorchScriptOptions& o) {
  return o.input == "images" ? fmt::format("images [2, 3, {0}, {0}]", o.image_size)
                             : fmt::format("input_ids and attention_mask [2, {}]",
                                           std::min<int64_t>(8, o.max_positions));
}

ModelCapabilities check_archive(const TorchScriptOptions& o) {
  ModelCapabilities capabilities{
      .image_size = o.input == "images" ? o.image_size : 0,
      .max_positions = o.input == "tokens" ? o.max_positions : 0,
      .num_classes = o.num_classes,
      .cuda_graphs_refusal =
          "runs a TorchScript module, whose interpreter decides on the host, op by op, what "
          "runs next (control flow on tensor values included), which one captured graph would "
          "freeze: use runtime.compile: none with model torchscript"};
  auto problem = [&](const std::string& what) {
    capabilities.files.problems.emplace_back("file",
                                             fmt::format("model.file '{}': {}", o.file, what));
    return capabilities;
  };
  std::error_code ec;
  if (!std::filesystem::is_regular_file(o.file, ec))
    return problem(fmt::format("no such file; {}", kScriptIt));
  torch::jit::Module module;
  try {
    module = load_archive(o.file);
  } catch (const UserError& e) {
    capabilities.files.problems.emplace_back("file", e.what());
    return capabilities;
  }
  if (const std::string wrong = check_signature(module, o.input); !wrong.empty())
    return problem(wrong + "; script a module whose forward takes what model.input names");
  if (const auto frozen = frozen_mode_ops(module); !frozen.empty())
    return problem(fmt::format(
        "made by torch.jit.trace, or with a constant training flag: {} behave the same in "
        "training and evaluation, so it would train with evaluation's behaviour or evaluate "
        "with training's; {}",
        join(frozen), kScriptIt));
  if (module.parameters().size() == 0)
    return problem(
        "has no parameters to train (a module frozen by torch.jit.freeze keeps its weights as "
        "constants); save the module before freezing it");
  const int64_t vocab_rows = o.input == "tokens" ? token_embedding_rows(module) : 0;
  capabilities.vocab_size = vocab_rows;
  torch::Tensor logits;
  try {
    torch::NoGradGuard no_grad;
    torch::jit::GraphOptimizerEnabledGuard unoptimised(false);
    module.eval();
    c10::IValue output = module.forward(trial_inputs(o, vocab_rows));
    if (!output.isTensor()) return problem("its forward returned no tensor on a trial batch");
    logits = output.toTensor();
  } catch (const std::exception& e) {
    return problem(fmt::format("a trial forward of {} failed: {}; check model.input{}",
                               trial_shape(o), error_summary(e.what()),
                               o.input == "images" ? " and model.image_size" : ""));
  }
  if (logits.dim() != 2 || logits.size(0) != 2 || !logits.is_floating_point())
    return problem(fmt::format(
        "a trial forward of {} returned {} {}; the forward must return logits [batch, classes]",
        trial_shape(o), c10::toString(logits.scalar_type()), fmt::join(logits.sizes(), "x")));
  if (o.num_classes > 0 && logits.size(1) != o.num_classes) {
    capabilities.files.problems.emplace_back(
        "num_classes",
        fmt::format("model.num_classes is {} but '{}' returns {} logits per sample on a trial "
                    "batch: the head is the module's own, so re-export the module with a head of "
                    "{} outputs (or, if {} is right, set model.num_classes: {})",
                    o.num_classes, o.file, logits.size(1), o.num_classes, logits.size(1),
                    logits.size(1)));
    return capabilities;
  }
  capabilities.num_classes = logits.size(1);
  return capabilities;
}

// Validation asks for capabilities once per run, and a sweep has many runs of one archive: each
// archive is loaded and tried once per process, for as long as its size and time stay the same.
ModelCapabilities describe_torchscript(const TorchScriptOptions& o) {
  const std::string key = fmt::format("{}\n{}\n{}\n{}\n{}\n{}", o.file, o.input, o.image_size,
                                      o.max_positions, o.num_classes, file_state(o.file));
  static std::mutex mutex;
  static std::map<std::string, ModelCapabilities> known;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = known.find(key);
  if (it == known.end()) it = known.emplace(key, check_archive(o)).first;
  return it->second;
}

class TorchScriptModel : public Model {
 public:
  TorchScriptModel(const TorchScriptOptions& options, torch::jit::Module module)
      : options_(options), module_(std::move(module)) {
    std::set<const c10::TensorImpl*> seen;
    adopt(module_, *this, seen);
    train(true);
  }

  torch::Tensor forward(const Batch& batch) override {
    std::vector<c10::IValue> inputs;
    if (options_.input == "images") {
      // Under bf16-true or 16-true the parameters are half precision: so are the images.
      inputs.push_back(batch.inputs.to(floating_dtype()));
    } else {
      inputs.push_back(batch.inputs);
      // A batch without padding carries no mask: every token counts.
      inputs.push_back(batch.attention_mask.defined() ? batch.attention_mask
                                                      : torch::ones_like(batch.inputs));
    }
    // Every call goes through this guard (the flag is per thread, and a graph once optimised would
    // stay so). Unoptimised, the interpreter runs each op through the dispatcher as eager PyTorch
    // does: autocast applies to it, and its losses are eager PyTorch's. (The optimising executor
    // would profile the first calls and then run a specialised, fused graph.)
    torch::jit::GraphOptimizerEnabledGuard unoptimised(false);
    c10::IValue output;
    try {
      output = module_.forward(inputs);
    } catch (const std::exception& e) {
      // The interpreter wraps every error (an allocator's out-of-memory included) in a message
      // that starts with its own traceback: keep the cause in the first line.
      throw std::runtime_error(
          fmt::format("the TorchScript module's forward failed: {}", error_summary(e.what())));
    }
    return output.toTensor();
  }

  // As PyTorch's Module.to: a dtype applies to floating-point tensors only. (LibTorch's converts
  // every tensor, which would make BatchNorm's num_batches_tracked a float.)
  void to(torch::Device device, torch::Dtype dtype, bool non_blocking = false) override {
    for (torch::Tensor& t : parameters_and_buffers())
      t.set_data(t.to(device, t.is_floating_point() ? dtype : t.scalar_type(), non_blocking));
  }
  void to(torch::Dtype dtype, bool non_blocking = false) override {
    for (torch::Tensor& t : parameters_and_buffers())
      if (t.is_floating_point()) t.set_data(t.to(dtype, non_blocking));
  }
  void to(torch::Device device, bool non_blocking = false) override {
    for (torch::Tensor& t : parameters_and_buffers()) t.set_data(t.to(device, non_blocking));
  }

  void train(bool on = true) override {
    torch::nn::Module::train(on);
    module_.train(on);
  }

 private:
  // The scripted module's parameters and buffers, registered as this module's under the same
  // names (one child module per scripted submodule): the same tensors, so an update through either
  // is seen by both, and to(), set_data() and strategies' flat buffers reach the interpreter.
  // A tensor reached by two names (a submodule or weight tied in Python, `self.b = self.a`) is
  // registered once, under the first, as PyTorch's named_parameters() lists it: twice, the
  // optimizer would step it twice and a sharding strategy would give it two slots.
  static void adopt(const torch::jit::Module& from, torch::nn::Module& into,
                    std::set<const c10::TensorImpl*>& seen) {
    for (const auto& p : from.named_parameters(/*recurse=*/false))
      if (seen.insert(p.value.unsafeGetTensorImpl()).second)
        into.register_parameter(p.name, p.value, p.value.requires_grad());
    for (const auto& b : from.named_buffers(/*recurse=*/false))
      if (b.value.defined() && seen.insert(b.value.unsafeGetTensorImpl()).second)
        into.register_buffer(b.name, b.value);
    for (const auto& child : from.named_children()) {
      auto mirror = std::make_shared<torch::nn::Module>(child.name);
      adopt(child.value, *mirror, seen);
      into.register_module(child.name, mirror);
    }
  }

  std::vector<torch::Tensor> parameters_and_buffers() const {
    std::vector<torch::Tensor> tensors = parameters();
    for (const auto& b : buffers()) tensors.push_back(b);
    return tensors;
  }

  c10::ScalarType floating_dtype() const {
    for (const auto& p : parameters())
      if (p.is_floating_point()) return p.scalar_type();
    return torch::kFloat;
  }

  TorchScriptOptions options_;
  torch::jit::Module module_;
};

}  // namespace

void register_torchscript(Registry& registry) {
  OptionSet<TorchScriptOptions> options;
  options
      .add("file", &TorchScriptOptions::file,
           "the TorchScript archive: torch.jit.save(torch.jit.script(model), PATH)",
           names_data(required()))
      .add("input", &TorchScriptOptions::input,
           "what forward takes: images [B, 3, H, W], or tokens (input_ids, attention_mask) [B, T]",
           one_of({"images", "tokens"}))
      .add("image_size", &TorchScriptOptions::image_size,
           "images: the resolution the dataset resizes to", at_least(1))
      .add("max_positions", &TorchScriptOptions::max_positions,
           "tokens: the longest sequence the module reads", at_least(1))
      .add("num_classes", &TorchScriptOptions::num_classes,
           "logits per sample; 0 = what the module returns on a trial batch", at_least(0));
  registry.add<ModelPtr(const ModelContext&)>(
      ComponentKind::model, "torchscript",
      "a network defined in Python and scripted (torch.jit.script, then torch.jit.save)", options,
      [](const TorchScriptOptions& o, const ModelContext& context) -> ModelPtr {
        const ModelCapabilities checked = describe_torchscript(o);
        if (!checked.files.problems.empty()) throw UserError(checked.files.problems.front().second);
        if (context.num_classes != checked.num_classes)
          throw UserError(fmt::format(
              "model 'torchscript': '{}' returns {} logits per sample but the dataset has {} "
              "classes; re-export the module with a head of {} outputs",
              o.file, checked.num_classes, context.num_classes, context.num_classes));
        return std::make_shared<TorchScriptModel>(o, load_archive(o.file));
      },
      describe_torchscript);
}

}  // namespace trainyard
