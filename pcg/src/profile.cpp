#include "pcgx/pcg/profile.h"

#include "json_fields.h"
#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph_json.h"

namespace pcgx {

using json_fields::index;
using json_fields::join;
using json_fields::json;
using json_fields::Reader;

namespace {

std::string key_of(const std::string& op, std::span<const std::vector<int64_t>> inputs) {
  std::string k = op;
  for (const auto& s : inputs) {
    k += '|';
    for (size_t i = 0; i < s.size(); ++i) k += (i ? "x" : "") + std::to_string(s[i]);
  }
  return k;
}

}  // namespace

void Profile::add(ProfileEntry e) {
  const std::string k = key_of(e.op, e.inputs);
  if (auto it = index_.find(k); it != index_.end()) {
    entries[it->second] = std::move(e);
    return;
  }
  index_.emplace(k, entries.size());
  entries.push_back(std::move(e));
}

const ProfileEntry* Profile::find(const std::string& op, std::span<const std::vector<int64_t>> inputs) const {
  auto it = index_.find(key_of(op, inputs));
  return it == index_.end() ? nullptr : &entries[it->second];
}

Profile profile_from_json(const std::string& text, const std::string& source) {
  const Reader r(source);
  const json root = r.parse(text);
  r.expect_object(root, "");
  r.only_keys(root, {"format_version", "kind", "device", "entries", "update", "bucket_copy", "links", "overhead", "roofline"}, "");
  r.check_version(root, 1, "pcgx.profile");
  auto number = [&](const json& obj, const std::string& key, const std::string& path, bool positive) {
    const double v = r.get_number(r.field(obj, key, path), join(path, key));
    if (v < 0 || (positive && v == 0)) r.fail(join(path, key), positive ? "must be positive" : "must not be negative");
    return v;
  };
  Profile p;
  if (const json* d = r.optional(root, "device")) p.device = r.get_string(*d, "device");
  const json& entries = r.field(root, "entries", "");
  if (!entries.is_array()) r.fail("entries", "expected an array");
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::string f = index("entries", i);
    const json& e = entries[i];
    r.expect_object(e, f);
    ProfileEntry x;
    x.op = r.get_string(r.field(e, "op", f), join(f, "op"));
    const json& inputs = r.field(e, "inputs", f);
    if (!inputs.is_array()) r.fail(join(f, "inputs"), "expected a list of shapes");
    for (const json& s : inputs) {
      if (!s.is_array()) r.fail(join(f, "inputs"), "expected a list of shapes");
      std::vector<int64_t> shape;
      for (const json& v : s) {
        if (!v.is_number_integer() || v.get<int64_t>() <= 0) r.fail(join(f, "inputs"), "sizes must be positive integers");
        shape.push_back(v.get<int64_t>());
      }
      x.inputs.push_back(std::move(shape));
    }
    x.forward = number(e, "forward", f, false);
    x.backward = number(e, "backward", f, false);
    p.add(std::move(x));
  }
  if (const json* u = r.optional(root, "update")) {
    r.expect_object(*u, "update");
    p.update_bytes_per_second = number(*u, "bytes_per_second", "update", true);
    if (u->contains("words")) p.update_words = number(*u, "words", "update", true);
  }
  if (const json* u = r.optional(root, "bucket_copy")) {
    r.expect_object(*u, "bucket_copy");
    p.bucket_copy_bytes_per_second = number(*u, "bytes_per_second", "bucket_copy", true);
  }
  if (const json* links = r.optional(root, "links")) {
    if (!links->is_array()) r.fail("links", "expected an array");
    for (size_t i = 0; i < links->size(); ++i) {
      const std::string f = index("links", i);
      const json& l = (*links)[i];
      r.expect_object(l, f);
      ProfileLink x;
      x.name = r.get_string(r.field(l, "name", f), join(f, "name"));
      x.latency = number(l, "latency", f, false);
      x.bandwidth = number(l, "bandwidth", f, true);
      if (r.optional(l, "step_latency")) x.step_latency = number(l, "step_latency", f, false);
      if (r.optional(l, "residual")) x.residual = number(l, "residual", f, false);
      if (r.optional(l, "samples")) x.samples = r.get_int(l["samples"], join(f, "samples"));
      p.links.push_back(std::move(x));
    }
  }
  if (const json* o = r.optional(root, "overhead")) {
    r.expect_object(*o, "overhead");
    p.node_overhead = number(*o, "node", "overhead", false);
    if (r.optional(*o, "byte")) p.byte_overhead = number(*o, "byte", "overhead", false);
  }
  if (const json* f = r.optional(root, "roofline")) {
    r.expect_object(*f, "roofline");
    p.peak_flops = number(*f, "peak_flops", "roofline", true);
    p.memory_bandwidth = number(*f, "memory_bandwidth", "roofline", true);
  }
  return p;
}

Profile load_profile(const std::string& path) { return profile_from_json(read_text_file(path), path); }

std::string profile_to_json(const Profile& p) {
  json entries = json::array();
  for (const ProfileEntry& e : p.entries)
    entries.push_back({{"op", e.op}, {"inputs", e.inputs}, {"forward", e.forward}, {"backward", e.backward}});
  json j = {{"format_version", 1}, {"kind", "pcgx.profile"}, {"device", p.device}, {"entries", entries}};
  if (p.update_bytes_per_second > 0) {
    j["update"] = {{"bytes_per_second", p.update_bytes_per_second}};
    if (p.update_words > 0) j["update"]["words"] = p.update_words;
  }
  if (p.bucket_copy_bytes_per_second > 0) j["bucket_copy"] = {{"bytes_per_second", p.bucket_copy_bytes_per_second}};
  if (!p.links.empty()) {
    json links = json::array();
    for (const ProfileLink& l : p.links) {
      links.push_back({{"name", l.name}, {"latency", l.latency}, {"bandwidth", l.bandwidth}, {"residual", l.residual}, {"samples", l.samples}});
      if (l.step_latency > 0) links.back()["step_latency"] = l.step_latency;
    }
    j["links"] = links;
  }
  if (p.node_overhead > 0 || p.byte_overhead > 0) j["overhead"] = {{"node", p.node_overhead}, {"byte", p.byte_overhead}};
  if (p.peak_flops > 0 && p.memory_bandwidth > 0) j["roofline"] = {{"peak_flops", p.peak_flops}, {"memory_bandwidth", p.memory_bandwidth}};
  return j.dump(2) + "\n";
}

}  // namespace pcgx
