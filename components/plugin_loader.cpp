#include "components/plugin_loader.h"

#include <dlfcn.h>
#include <elf.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "common/files.h"
#include "common/text.h"

namespace trainyard {

namespace fs = std::filesystem;

namespace {

// The fix every incompatible plugin has: what docs/plugins.md says to do.
constexpr const char* kRebuild =
    "rebuild the plugin against this Trainyard (configure its build with "
    "-DCMAKE_PREFIX_PATH=<where this trainyard is installed>, docs/plugins.md)";

#if defined(__x86_64__)
constexpr uint16_t kThisMachine = EM_X86_64;
#elif defined(__aarch64__)
constexpr uint16_t kThisMachine = EM_AARCH64;
#else
#error "read_plugin_stamp: add this machine's ELF e_machine"
#endif

// `count` objects of T at `offset` of `bytes`, or false when the file is too short for them.
template <class T>
bool read_at(const std::string& bytes, uint64_t offset, uint64_t count, std::vector<T>& out) {
  if (offset > bytes.size() || count > (bytes.size() - offset) / sizeof(T)) return false;
  out.resize(count);
  std::memcpy(out.data(), bytes.data() + offset, count * sizeof(T));
  return true;
}

// "api=1 torch=2.11.0 cxx11-abi=1" -> {api: 1, torch: 2.11.0, cxx11-abi: 1}.
std::map<std::string, std::string> stamp_fields(const std::string& stamp) {
  std::map<std::string, std::string> fields;
  std::istringstream words(stamp);
  std::string word;
  while (words >> word)
    if (size_t equals = word.find('='); equals != std::string::npos)
      fields[word.substr(0, equals)] = word.substr(equals + 1);
  return fields;
}

// Why a plugin stamped `theirs` cannot be loaded by a binary stamped `ours`; "" when it can.
std::string incompatibility(const std::string& theirs, const std::string& ours) {
  const auto plugin = stamp_fields(theirs), host = stamp_fields(ours);
  struct Field {
    const char* key;
    const char* what;
  };
  std::vector<std::string> differences;
  for (const Field& field : {Field{"api", "plugin API version"}, Field{"torch", "LibTorch"},
                             Field{"cxx11-abi", "C++ string ABI (_GLIBCXX_USE_CXX11_ABI)"},
                             Field{"yaml-cpp", "yaml-cpp"}}) {
    auto it = plugin.find(field.key);
    const std::string value = it == plugin.end() ? "unknown" : it->second;
    if (value != host.at(field.key))
      differences.push_back(
          fmt::format("{} {} (this trainyard: {})", field.what, value, host.at(field.key)));
  }
  return join(differences, ", ");
}

std::string describe(const ComponentEntry& entry) {
  return fmt::format("{} '{}'", to_string(entry.kind), entry.name);
}

}  // namespace

std::string read_plugin_stamp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream content;
  content << in.rdbuf();
  if (!in) throw UserError(fmt::format("plugin '{}': cannot read the file", path));
  const std::string bytes = content.str();
  auto not_a_library = [&](const std::string& why) {
    return UserError(fmt::format(
        "plugin '{}' is not a shared library ({}); name the .so file the plugin's build wrote "
        "(trainyard_add_plugin, docs/plugins.md)",
        path, why));
  };
  std::vector<Elf64_Ehdr> header;
  if (!read_at(bytes, 0, 1, header) || std::memcmp(header[0].e_ident, ELFMAG, SELFMAG) != 0)
    throw not_a_library("not an ELF file");
  const Elf64_Ehdr& elf = header[0];
  if (elf.e_ident[EI_CLASS] != ELFCLASS64 || elf.e_machine != kThisMachine)
    throw not_a_library("an ELF file for another machine");
  if (elf.e_type != ET_DYN)
    throw not_a_library(elf.e_type == ET_REL ? "an object file: link it into a library"
                                             : "an ELF executable");
  std::vector<Elf64_Shdr> sections;
  if (elf.e_shentsize != sizeof(Elf64_Shdr) ||
      !read_at(bytes, elf.e_shoff, elf.e_shnum, sections) || elf.e_shstrndx >= sections.size())
    throw not_a_library("its section table is damaged");
  const Elf64_Shdr& names = sections[elf.e_shstrndx];
  for (const Elf64_Shdr& section : sections) {
    std::vector<char> name;
    if (!read_at(bytes, names.sh_offset + section.sh_name, sizeof(".trainyard_plugin"), name) ||
        section.sh_name >= names.sh_size)
      continue;
    if (std::memcmp(name.data(), ".trainyard_plugin", sizeof(".trainyard_plugin")) != 0) continue;
    std::vector<char> stamp;
    if (section.sh_type != SHT_PROGBITS ||
        !read_at(bytes, section.sh_offset, section.sh_size, stamp))
      throw not_a_library("its .trainyard_plugin section is damaged");
    return std::string(stamp.data(), strnlen(stamp.data(), stamp.size()));
  }
  return "";
}

PluginLoader::PluginLoader(Registry registry, std::string host_stamp)
    : registry_(std::move(registry)), host_stamp_(std::move(host_stamp)) {}

void PluginLoader::add_command_line_plugin(const std::string& path) {
  const std::string absolute = load(path).ref.path;
  if (std::find(command_line_.begin(), command_line_.end(), absolute) == command_line_.end())
    command_line_.push_back(absolute);
}

std::string changed_plugin_message(const std::string& path, const std::string& was,
                                   const std::string& is) {
  return fmt::format(
      "plugin '{}' changed after this run was configured (sha256 was {}, is now {}): its "
      "components are no longer the run's; a rebuilt plugin is a new configuration, so run the "
      "experiment again to train it",
      path, was.substr(0, 12), is.substr(0, 12));
}

const LoadedPlugin& PluginLoader::load(const std::string& given,
                                       const std::string& expected_sha256) {
  // Symbolic links resolved: one library reached by two paths is loaded (and registers) once.
  std::error_code canonical_error;
  std::string path = fs::weakly_canonical(fs::absolute(given), canonical_error).string();
  if (canonical_error) path = fs::absolute(given).lexically_normal().string();
  for (const auto& plugin : loaded_)
    if (plugin.ref.path == path) return plugin;
  std::error_code ec;
  if (!fs::exists(path, ec))
    throw UserError(
        fmt::format("plugin '{}': no such file; build the plugin (docs/plugins.md) "
                    "or correct the path",
                    path));
  if (!fs::is_regular_file(path, ec))
    throw UserError(fmt::format("plugin '{}' is not a file; name the plugin's .so file", path));

  // Nothing of the library runs before its stamp says it was built as this binary was.
  const std::string stamp = read_plugin_stamp(path);
  if (stamp.empty())
    throw UserError(fmt::format(
        "plugin '{}' is a shared library but not a Trainyard plugin: it has no plugin entry "
        "point (TRAINYARD_PLUGIN(your_register_function) in one of its sources declares it; "
        "docs/plugins.md)",
        path));
  if (std::string why = incompatibility(stamp, host_stamp_); !why.empty())
    throw UserError(fmt::format("plugin '{}' was built against another Trainyard: {}; {}", path,
                                why, kRebuild));

  LoadedPlugin plugin;
  plugin.ref.path = path;
  try {
    plugin.ref.sha256 = file_sha256(path);
  } catch (const std::runtime_error& e) {
    throw UserError(fmt::format("plugin '{}': {}", path, e.what()));
  }
  if (!expected_sha256.empty() && plugin.ref.sha256 != expected_sha256)
    throw UserError(changed_plugin_message(path, expected_sha256, plugin.ref.sha256));
  // RTLD_LOCAL: one plugin's symbols never stand in for another's. RTLD_NOW: a symbol it needs
  // and this binary lacks is found here, not in the middle of a run.
  void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr)
    throw UserError(fmt::format(
        "plugin '{}' cannot be loaded: {}; a plugin may use what the SDK's headers declare and "
        "LibTorch, nothing else of trainyard (docs/plugins.md, \"The stable API\"); if the headers "
        "changed, {}",
        path, dlerror(), kRebuild));
  using Entry = void (*)(Registry&);
  auto entry = reinterpret_cast<Entry>(dlsym(library, "trainyard_plugin_v1"));
  if (entry == nullptr)
    throw UserError(fmt::format(
        "plugin '{}' has a Trainyard stamp but no entry point trainyard_plugin_v1; declare it "
        "with TRAINYARD_PLUGIN(your_register_function) (docs/plugins.md)",
        path));

  Registry staged;  // what the plugin registers joins registry_ only once every name is free
  try {
    entry(staged);
  } catch (const std::exception& e) {
    throw UserError(fmt::format("plugin '{}': its entry point failed: {}", path, e.what()));
  } catch (...) {
    throw UserError(fmt::format(
        "plugin '{}': its entry point threw something that is not a std::exception", path));
  }
  std::vector<std::string> clashes;
  for (ComponentKind kind : all_component_kinds())
    for (const ComponentEntry* entry : staged.entries(kind)) {
      plugin.components.push_back(describe(*entry));
      if (kind == ComponentKind::strategy || kind == ComponentKind::precision)
        throw UserError(fmt::format(
            "plugin '{}' registers {}: precisions and strategies cannot come from a plugin "
            "(their interfaces are not part of the public API, docs/plugins.md); register "
            "models, datasets, optimizers and schedulers",
            path, describe(*entry)));
      if (const ComponentEntry* existing = registry_.find(kind, entry->name))
        clashes.push_back(fmt::format(
            "{} is {}", describe(*entry),
            existing->library.empty() ? "built in"
                                      : "registered by plugin '" + existing->library + "' too"));
    }
  if (!clashes.empty())
    throw UserError(
        fmt::format("plugin '{}' registers names already taken: {}; rename its "
                    "components (the name given to registry.add)",
                    path, join(clashes, "; ")));
  if (plugin.components.empty())
    throw UserError(fmt::format("plugin '{}': its entry point registered no component", path));
  registry_.adopt(std::move(staged), path);
  loaded_.push_back(std::move(plugin));
  return loaded_.back();
}

}  // namespace trainyard
