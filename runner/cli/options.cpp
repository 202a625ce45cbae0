#include "runner/cli/options.h"

#include <filesystem>
#include <iostream>
#include <sstream>

#include <fmt/format.h>

#include "common/error.h"

namespace trainyard {

bool parse_command_line(const std::vector<std::string>& args,
                        const boost::program_options::options_description& options,
                        const boost::program_options::positional_options_description& positional,
                        boost::program_options::variables_map& vm,
                        const boost::program_options::options_description& arguments) {
  namespace po = boost::program_options;
  po::options_description everything;
  everything.add(options).add(arguments);
  try {
    po::store(po::command_line_parser(args).options(everything).positional(positional).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw UserError(fmt::format("{}\n{}", e.what(), [&] {
      std::ostringstream text;
      text << options;
      return text.str();
    }()));
  }
  if (vm.count("help")) {
    std::cout << options;
    return false;
  }
  return true;
}

std::string log_dir_of(const std::string& db_path) {
  const std::filesystem::path db(db_path);
  const std::filesystem::path logs = db.has_parent_path() ? db.parent_path() / "logs" : "logs";
  return std::filesystem::absolute(logs).string();
}

}  // namespace trainyard
