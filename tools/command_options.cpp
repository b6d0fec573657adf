#include "tools/command_options.h"

#include <CLI/CLI.hpp>

namespace hcclsim {

CommandOption* CommandOption::type_name(const std::string& text) {
  option_.type_name(text);
  return this;
}

CommandOption* CommandOption::required() {
  option_.required();
  return this;
}

std::size_t CommandOption::count() const { return option_.count(); }

std::string CommandOption::get_name() const { return option_.get_name(); }

CommandOptions::CommandOptions(CLI::App& app) : app_(app) {}
CommandOptions::~CommandOptions() = default;

CommandOption* CommandOptions::keep(CLI::Option* option) {
  options_.push_back(std::make_unique<CommandOption>(*option));
  return options_.back().get();
}

CommandOption* CommandOptions::add_option(const std::string& names, std::string& into, const std::string& description) {
  return keep(app_.add_option(names, into, description));
}

CommandOption* CommandOptions::add_option(const std::string& names, int& into, const std::string& description) {
  return keep(app_.add_option(names, into, description));
}

CommandOption* CommandOptions::add_option(const std::string& names, std::vector<std::string>& into,
                                          const std::string& description) {
  return keep(app_.add_option(names, into, description));
}

CommandOption* CommandOptions::add_flag(const std::string& names, bool& into, const std::string& description) {
  return keep(app_.add_flag(names, into, description));
}

CommandOptions* CommandOptions::add_subcommand(const std::string& name, const std::string& description) {
  subcommands_.push_back(std::make_unique<CommandOptions>(*app_.add_subcommand(name, description)));
  return subcommands_.back().get();
}

void CommandOptions::require_subcommand(int least, int most) { app_.require_subcommand(least, most); }

void CommandOptions::footer(const std::string& text) { app_.footer(text); }

bool CommandOptions::parsed() const { return app_.parsed(); }

}  // namespace hcclsim
