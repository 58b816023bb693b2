#include "cli_common.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "pcgx/generator/opset.h"
#include "pcgx/importer/onnx_import.h"
#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph_json.h"

namespace pcgx::cli {

Graph load_model(const std::string& model, const std::vector<std::string>& sets, std::map<std::string, Tensor<float>>* weights) {
  if (model.size() > 5 && model.ends_with(".onnx") && std::filesystem::exists(model)) {
    importer::ImportOptions o;
    for (const auto& s : sets) {
      if (s.rfind("batch=", 0) != 0) throw Error("--set " + s + ": an ONNX model takes only batch=N (its symbolic batch dimension)");
      o.batch = parse_int(s.substr(6), "--set " + s + ": value");
    }
    importer::ImportedModel m = importer::import_onnx(model, o);
    if (weights) *weights = std::move(m.weights);
    return std::move(m.graph);
  }
  if (find_model(model)) {
    ModelParams overrides;
    for (const auto& s : sets) {
      const auto eq = s.find('=');
      if (eq == std::string::npos || eq == 0) throw Error("--set " + s + ": expected key=value");
      overrides[s.substr(0, eq)] = parse_int(s.substr(eq + 1), "--set " + s + ": value");
    }
    return build_model(model, overrides);
  }
  if (!std::filesystem::exists(model))
    throw Error(model + ": neither a zoo model (`pcgx models` lists them) nor an existing file");
  if (!sets.empty()) throw Error("--set applies to zoo models only, not to the file " + model);
  return load_graph(model);
}

LegacyDims parse_dims(const std::string& s) {
  if (s == "reversed") return LegacyDims::kReversed;
  if (s == "forward") return LegacyDims::kForward;
  throw Error("--dims " + s + ": expected reversed or forward");
}

void check_format(const std::string& f) {
  if (f != "pcgx" && f != "flexflow") throw Error("--format " + f + ": expected pcgx or flexflow");
}

int64_t parse_int(const std::string& text, const std::string& what) {
  size_t used = 0;
  int64_t v = 0;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size()) throw Error(what + " '" + text + "' is not an integer");
  return v;
}

static std::string scaled(double v, const char* const* units, int n, double base, int decimals) {
  int u = 0;
  while (u + 1 < n && std::fabs(v) >= base) {
    v /= base;
    ++u;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f%s", u == 0 ? 0 : decimals, v, units[u]);
  return buf;
}

std::string human_count(double n) {
  static const char* const units[] = {"", "K", "M", "B", "T"};
  return scaled(n, units, 5, 1000.0, 1);
}

std::string human_bytes(double b) {
  static const char* const units[] = {" B", " KiB", " MiB", " GiB", " TiB"};
  return scaled(b, units, 5, 1024.0, 2);
}

std::string human_flops(double f) {
  static const char* const units[] = {" FLOP", " KFLOP", " MFLOP", " GFLOP", " TFLOP", " PFLOP"};
  return scaled(f, units, 6, 1000.0, 2);
}

std::string with_commas(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

std::string one_line(const std::string& message) {
  std::string out;
  out.reserve(message.size());
  for (const char ch : message) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out;
}

Ruleset load_search_ruleset(const std::string& path, bool allow_unverified) {
  Ruleset r = load_ruleset(path);
  if (const auto why = unverified_reason(r)) {
    if (!allow_unverified) throw Error(path + ": not a verified ruleset: " + *why + " (--allow-unverified to search with it anyway)");
    std::cerr << "warning: " << one_line(path + ": searching with an unverified ruleset (--allow-unverified): " + *why) << "\n";
  }
  return r;
}

CLI::Validator positive() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        size_t used = 0;
        long long v = 0;
        try {
          v = std::stoll(value, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        return used == value.size() && v > 0 ? "" : "must be a positive integer, got '" + value + "'";
      },
      "POSITIVE");
}

bool is_strategy_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return false;
  const auto j = nlohmann::json::parse(in, nullptr, false);
  return !j.is_discarded() && j.is_object() && j.value("kind", "") == "pcgx.strategy";
}

ChosenBackend choose_backend(const std::string& name) {
  const std::optional<runner::BackendKind> chosen = runner::backend_kind(name);
  if (!chosen) throw Error("--backend: unknown backend '" + name + "' (auto, cpu, mpi, cuda)");
  const bool under_mpi = runtime::mpi_launched();
  ChosenBackend c;
  c.kind = runner::resolve(*chosen, under_mpi);
  c.gpu = c.kind == runner::BackendKind::kCuda;
  if (c.gpu) {
    std::string why;
    if (runner::cuda_devices(&why) == 0) throw Error("--backend: cuda needs a GPU, and there is none: " + why);
  }
  if (c.kind == runner::BackendKind::kMpi || (c.gpu && under_mpi)) c.world = std::make_unique<runtime::MpiWorld>();
  return c;
}

std::string opset_help() {
  std::string names;
  try {
    for (const auto& o : gen::named_opsets()) names += (names.empty() ? "" : ", ") + o.name;
  } catch (const Error& e) {
    names = "unreadable: " + std::string(e.what());
  }
  return "operator set: a shipped one (" + names + ", in " + gen::opsets_dir() + ") or an opset file (pcgx.opset JSON)";
}

bool report_unencoded(const std::map<std::string, int>& unencoded) {
  if (unencoded.empty()) return false;
  std::string list;
  int n = 0;
  for (const auto& [op, count] : unencoded) list += (list.empty() ? "" : ", ") + op + " (" + std::to_string(count) + ")", n += count;
  std::cerr << n << " candidates are unproved because their operators have no SMT encoding: " << list
            << "; give each registry entry its SMT forms, OpDef::smt (pcgx ops check NAME)\n";
  return true;
}

}  // namespace pcgx::cli
