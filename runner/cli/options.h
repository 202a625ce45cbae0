// Command-line parsing shared by the subcommands (Boost.Program_options).
#pragma once

#include <string>
#include <vector>

#include <boost/program_options.hpp>

namespace trainyard {

// Parses `args` into `vm`. Prints the help and returns false for --help; throws UserError
// (naming the bad option and how to get help) on anything it does not understand. `arguments`
// declares what `positional` names (the FILE... of `trainyard run`): parsed, but left out of the
// help, whose first line already shows them.
bool parse_command_line(const std::vector<std::string>& args,
                        const boost::program_options::options_description& options,
                        const boost::program_options::positional_options_description& positional,
                        boost::program_options::variables_map& vm,
                        const boost::program_options::options_description& arguments = {});

// The folder of the runs' logs and files for the database at `db_path`: logs/ beside it, absolute.
std::string log_dir_of(const std::string& db_path);

}  // namespace trainyard
