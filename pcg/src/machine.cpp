#include "pcgx/pcg/machine.h"

#include "json_fields.h"
#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph_json.h"

namespace pcgx {

using json_fields::index;
using json_fields::join;
using json_fields::json;
using json_fields::Reader;

const LinkLevel& Machine::link_between(int64_t a, int64_t b) const {
  for (const auto& l : links)
    if (l.span == 0 || a / l.span == b / l.span) return l;
  return links.back();
}

Machine Machine::with_devices(int64_t n) const {
  if (n < 1 || n > num_devices())
    throw FieldError("Machine.devices", std::to_string(n) + " is not in 1.." + std::to_string(num_devices()) + " (machine '" + name + "' has " +
                                            std::to_string(num_devices()) + " devices)");
  Machine m = *this;
  if (n <= devices_per_node) {
    m.nodes = 1;
    m.devices_per_node = n;
  } else {
    if (n % devices_per_node != 0)
      throw FieldError("Machine.devices", std::to_string(n) + " is not a whole number of " + std::to_string(devices_per_node) +
                                              "-device nodes of machine '" + name + "'");
    m.nodes = n / devices_per_node;
  }
  // The first level as wide as the machine now spans all of it, and the
  // levels above it are never used (so the result is a valid machine
  // description of its own).
  for (size_t i = 0; i < m.links.size(); ++i)
    if (m.links[i].span >= n || m.links[i].span == 0) {
      m.links[i].span = 0;
      m.links.resize(i + 1);
      break;
    }
  return m;
}

bool DeviceSpec::has_precision_table() const {
  for (const double f : peak_flops_by_precision)
    if (f > 0) return true;
  return false;
}

double DeviceSpec::peak(Precision p) const {
  if (!has_precision_table()) return peak_flops;
  const double f = peak_flops_by_precision[static_cast<size_t>(p)];
  if (f <= 0)
    throw FieldError("Machine.device.peak_flops_by_precision",
                     name + " has no peak FLOP/s for " + pcgx::name(p) + " (the machine file lists other precisions only)");
  return f;
}

std::string machine_to_json(const Machine& m) {
  json root;
  root["format_version"] = kMachineFormatVersion;
  root["kind"] = "pcgx.machine";
  root["name"] = m.name;
  if (!m.description.empty()) root["description"] = m.description;
  root["nodes"] = m.nodes;
  root["devices_per_node"] = m.devices_per_node;
  root["device"] = {{"name", m.device.name},
                    {"peak_flops", m.device.peak_flops},
                    {"memory_bandwidth", m.device.memory_bandwidth},
                    {"memory_capacity", m.device.memory_capacity}};
  if (m.device.has_precision_table()) {
    json table = json::object();
    for (const Precision p : kPrecisions)
      if (const double f = m.device.peak_flops_by_precision[static_cast<size_t>(p)]; f > 0) table[name(p)] = f;
    root["device"]["peak_flops_by_precision"] = table;
  }
  if (!m.device.overlaps_communication) root["device"]["overlaps_communication"] = false;
  json links = json::array();
  for (const auto& l : m.links) {
    json level = {{"name", l.name}, {"span", l.span}, {"bandwidth", l.bandwidth}, {"latency", l.latency}};
    if (l.ports != 1) level["ports"] = l.ports;
    if (l.step_latency > 0) level["step_latency"] = l.step_latency;
    links.push_back(level);
  }
  root["links"] = links;
  return root.dump(2) + "\n";
}

Machine machine_from_json(const std::string& text, const std::string& source) {
  const Reader r(source);
  const json root = r.parse(text);
  r.expect_object(root, "");
  r.only_keys(root, {"format_version", "kind", "name", "description", "nodes", "devices_per_node", "device", "links"}, "");
  r.check_version(root, kMachineFormatVersion, "pcgx.machine");
  Machine m;
  m.name = r.get_string(r.field(root, "name", ""), "name");
  if (const json* d = r.optional(root, "description")) m.description = r.get_string(*d, "description");
  auto positive_int = [&](const json& obj, const std::string& key, const std::string& path) {
    const int64_t v = r.get_int(r.field(obj, key, path), join(path, key));
    if (v < 1) r.fail(join(path, key), "must be positive, got " + std::to_string(v));
    return v;
  };
  auto positive_number = [&](const json& obj, const std::string& key, const std::string& path, bool allow_zero) {
    const double v = r.get_number(r.field(obj, key, path), join(path, key));
    if (v < 0 || (!allow_zero && v == 0)) r.fail(join(path, key), "must be positive, got " + std::to_string(v));
    return v;
  };
  m.nodes = positive_int(root, "nodes", "");
  m.devices_per_node = positive_int(root, "devices_per_node", "");

  const json& dev = r.field(root, "device", "");
  r.expect_object(dev, "device");
  r.only_keys(dev, {"name", "peak_flops", "peak_flops_by_precision", "memory_bandwidth", "memory_capacity", "overlaps_communication"},
              "device");
  m.device.name = r.get_string(r.field(dev, "name", "device"), "device.name");
  m.device.peak_flops = positive_number(dev, "peak_flops", "device", false);
  if (const json* t = r.optional(dev, "peak_flops_by_precision")) {
    const std::string path = "device.peak_flops_by_precision";
    r.expect_object(*t, path);
    for (const auto& [key, value] : t->items()) {
      const std::optional<Precision> p = precision_named(key);
      if (!p) r.fail(join(path, key), "unknown precision (fp32, tf32, bf16, fp16)");
      m.device.peak_flops_by_precision[static_cast<size_t>(*p)] = positive_number(*t, key, path, false);
    }
  }
  m.device.memory_bandwidth = positive_number(dev, "memory_bandwidth", "device", false);
  m.device.memory_capacity = positive_number(dev, "memory_capacity", "device", false);
  if (const json* o = r.optional(dev, "overlaps_communication")) m.device.overlaps_communication = r.get_bool(*o, "device.overlaps_communication");

  const json& links = r.field(root, "links", "");
  if (!links.is_array() || links.empty()) r.fail("links", "must be a non-empty array of link levels");
  int64_t prev_span = 1;
  for (size_t i = 0; i < links.size(); ++i) {
    const std::string path = index("links", i);
    const json& l = links[i];
    r.expect_object(l, path);
    r.only_keys(l, {"name", "span", "bandwidth", "latency", "ports", "step_latency"}, path);
    LinkLevel level;
    level.name = r.get_string(r.field(l, "name", path), join(path, "name"));
    level.span = r.get_int(r.field(l, "span", path), join(path, "span"));
    level.bandwidth = positive_number(l, "bandwidth", path, false);
    level.latency = positive_number(l, "latency", path, true);
    if (r.optional(l, "ports")) level.ports = positive_int(l, "ports", path);
    if (r.optional(l, "step_latency")) level.step_latency = positive_number(l, "step_latency", path, true);
    const bool last = i + 1 == links.size();
    // A group of the level below reaches this one through at most one
    // link per device it holds (a DGX node's eight adapters for eight GPUs).
    if (level.ports > prev_span)
      r.fail(join(path, "ports"), std::to_string(level.ports) + " links per group of the level below, which holds " + std::to_string(prev_span) +
                                      " device" + (prev_span == 1 ? "" : "s") + ": at most one per device");
    if (level.span < 0) r.fail(join(path, "span"), "must not be negative");
    if (level.span == 0 && !last) r.fail(join(path, "span"), "only the last level may span the whole machine (0)");
    if (level.span > 0) {
      if (level.span <= prev_span && i > 0)
        r.fail(join(path, "span"), "must be larger than the previous level's span " + std::to_string(prev_span));
      if (level.span % prev_span != 0)
        r.fail(join(path, "span"), "must be a multiple of the previous level's span " + std::to_string(prev_span));
      if (m.num_devices() % level.span != 0)
        r.fail(join(path, "span"), "must divide the machine's " + std::to_string(m.num_devices()) + " devices");
      prev_span = level.span;
    }
    m.links.push_back(level);
  }
  if (m.links.back().span != 0 && m.links.back().span != m.num_devices())
    r.fail(index("links", links.size() - 1) + ".span", "the last level must span the whole machine (0 or " +
                                                          std::to_string(m.num_devices()) + ")");
  return m;
}

Machine load_machine(const std::string& path) { return machine_from_json(read_text_file(path), path); }

}  // namespace pcgx
