// A regenerated ruleset written into its directory (see regenerate_into.h).
#include "pcgx/rulegen/regenerate_into.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph_json.h"

namespace pcgx::rulegen {

RegenerateReport regenerate_into(RegenerateRequest q) {
  namespace fs = std::filesystem;
  if (q.version < 1) throw Error("RegenerateRequest.version " + std::to_string(q.version) + ": must be positive");
  if (!fs::is_directory(q.out_dir)) throw Error("RegenerateRequest.out_dir " + q.out_dir + ": not a directory");
  RegenerateReport out;
  const std::string base = q.options.opset.name + "-v" + std::to_string(q.version);
  const fs::path path = fs::path(q.out_dir) / (base + ".json");
  out.path = path.string();
  if (q.reuse == RegenerateRequest::Reuse::kFile) out.reused_from = q.reuse_file;
  else if (q.reuse == RegenerateRequest::Reuse::kReplaced && fs::exists(path)) out.reused_from = out.path;
  std::optional<Ruleset> previous;
  if (!out.reused_from.empty()) {
    try {
      previous = load_ruleset(out.reused_from);
    } catch (const Error& e) {
      throw Error(std::string(e.what()) + " (the ruleset whose proofs would be reused; RegenerateRequest.reuse none proves every candidate without it)");
    }
    q.options.previous = &*previous;
  }
  out.result = regenerate(q.options, verify::load_axioms(verify::axiom_search_path(q.axiom_dirs)));
  Ruleset& r = out.result.proved.ruleset;
  r.version = q.version;
  save_ruleset(r, out.path);
  write_text_file_atomic((fs::path(q.out_dir) / (base + ".unproved.txt")).string(), out.result.proved.unproved);
  // The manifest: one entry per ruleset of the directory.
  const fs::path manifest = fs::path(q.out_dir) / "MANIFEST.json";
  out.manifest = manifest.string();
  nlohmann::json m = fs::exists(manifest) ? nlohmann::json::parse(read_text_file(out.manifest)) : nlohmann::json::object();
  out.content_hash = load_ruleset(out.path).stored_hash;
  m["format_version"] = 1;
  m["rulesets"][base] = {{"file", base + ".json"},
                         {"name", r.name},
                         {"version", q.version},
                         {"opset", q.options.opset.name},
                         {"candidates", out.result.candidates.rules.size()},
                         {"rules", r.rules.size()},
                         {"content_hash", out.content_hash},
                         {"axioms_hash", r.axioms_hash},
                         {"axioms", r.axiom_digests.size()},
                         {"generator", nlohmann::json::parse(r.generator_json)},
                         {"command", q.command},
                         {"seconds", {{"generate", out.result.generate_seconds}, {"verify", out.result.verify_seconds}}}};
  write_text_file_atomic(out.manifest, m.dump(2) + "\n");
  return out;
}

}  // namespace pcgx::rulegen
