// pcgx: the command-line front end. Each subcommand lives in cmd_*.cpp and
// only parses arguments and calls the libraries. Exit codes: 0 success,
// 1 a check failed, 2 bad input (one `error:` line on stderr).
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "cli_common.h"
#include "pcgx/pcg/error.h"
#include "pcgx/pcg/plugin.h"

namespace {

// Plugins register operators, so they load before anything reads the
// registry (pcg/plugin.h): $PCGX_PLUGIN_PATH, then each --plugin given
// before the subcommand, in order. CLI11 parses --plugin again below,
// for --help and for its checks, and ignores the value.
void load_plugins_first(int argc, char** argv) {
  if (const char* path = std::getenv("PCGX_PLUGIN_PATH"); path && *path) pcgx::load_plugins(path);
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (std::strcmp(a, "--plugin") == 0 && i + 1 < argc) pcgx::load_plugin(argv[++i]);
    else if (std::strncmp(a, "--plugin=", 9) == 0) pcgx::load_plugin(a + 9);
    else if (a[0] != '-') break;  // the subcommand
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    load_plugins_first(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "error: " << pcgx::cli::one_line(e.what()) << "\n";
    return 2;
  }
  CLI::App app{"pcgx: a substitution superoptimizer and verification toolkit for distributed DNN training"};
  app.name("pcgx");
  app.require_subcommand(1);
  app.set_version_flag("--version", "pcgx 0.1.0");
  static std::vector<std::string> plugins;
  app.add_option("--plugin", plugins,
                 "load a shared library that adds operators (and its axioms and opsets) before the subcommand; repeatable. "
                 "$PCGX_PLUGIN_PATH: ':'-separated libraries or directories of them, loaded first")
      ->type_name("LIB.so")
      ->allow_extra_args(false);  // one library per --plugin: the next word is the subcommand
  pcgx::cli::add_models_command(app);
  pcgx::cli::add_info_command(app);
  pcgx::cli::add_import_command(app);
  pcgx::cli::add_export_command(app);
  pcgx::cli::add_ops_command(app);
  pcgx::cli::add_generate_command(app);
  pcgx::cli::add_ruleset_command(app);
  pcgx::cli::add_axioms_command(app);
  pcgx::cli::add_verify_command(app);
  pcgx::cli::add_audit_command(app);
  pcgx::cli::add_regenerate_command(app);
  pcgx::cli::add_optimize_command(app);
  pcgx::cli::add_plan_command(app);
  pcgx::cli::add_simulate_command(app);
  pcgx::cli::add_run_command(app);
  pcgx::cli::add_eval_command(app);
  pcgx::cli::add_calibrate_command(app);
  // Fields every command that takes a model and a machine sets the same way.
  pcgx::cli::name_flags({{"ModelParams.", "--set "},
                         {"ModelParams", "--set"},
                         {"Machine.name", "--machine"},
                         {"Machine.devices", "--devices"},
                         {"GeneratorConfig.max_ops", "--max-ops"},
                         {"GeneratorConfig.degrees", "--degrees"},
                         {"GeneratorConfig.ndims", "--ndims"},
                         {"Opset.name", "--opset"},
                         {"Opset.ops", "--ops"},
                         {"ImportOptions.batch", "--set batch=N"}});
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::RuntimeError& e) {
    return e.get_exit_code();  // a check failed; the command printed why
  } catch (const CLI::ParseError& e) {
    std::cerr << "error: " << pcgx::cli::one_line(e.what()) << " (see `pcgx --help`)\n";
    return 2;
  } catch (const pcgx::Error& e) {
    std::cerr << "error: " << pcgx::cli::one_line(pcgx::cli::with_flags(e.what())) << "\n";
    return 2;
  } catch (const std::bad_alloc&) {
    std::cerr << "error: out of memory\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "error: " << pcgx::cli::one_line(e.what()) << "\n";
    return 2;
  }
  return 0;
}
