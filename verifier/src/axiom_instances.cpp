#include "axiom_instances.h"

#include <algorithm>
#include <bit>
#include <map>
#include <numeric>
#include <optional>

#include "encoding.h"

namespace pcgx::verify {

namespace {

// What each integer variable of an axiom stands for: the attribute (or
// helper argument) it first appears as.
void integer_roles(const z3::expr& e, std::map<unsigned, std::string>& roles) {
  if (!e.is_app()) return;
  const std::string f = e.decl().name().str();
  const Encoding* enc = encoding_by_symbol(f);
  std::vector<std::string> slot(e.num_args());
  if (enc) {
    size_t k = static_cast<size_t>(enc->tensors);
    for (const SmtArg& a : enc->attrs) {
      if (a.code == SmtCode::kFraction) {
        if (k < slot.size()) slot[k++] = "scalar_num";
        if (k < slot.size()) slot[k++] = "scalar_den";
      } else if (k < slot.size()) {
        slot[k++] = a.code == SmtCode::kPermDigits ? "perm" : a.code == SmtCode::kShapeDigits ? "shape" : a.attr;
      }
    }
  } else if (f == "perm_at" || f == "perm_pos" || f == "perm_compose" || f == "perm_is_identity") {
    slot[0] = "perm";
    if (slot.size() > 1) slot[1] = f == "perm_compose" ? "perm" : "dim";
  } else if (f == "shape_at" || f == "reshape_keeps") {
    slot[f == "shape_at" ? 0 : 1] = "shape";
  }
  for (unsigned i = 0; i < e.num_args(); ++i) {
    const z3::expr a = e.arg(i);
    if (is_var(a)) {
      const unsigned v = var_index(a);
      if (!slot[i].empty() && !roles.count(v)) roles[v] = slot[i];
    } else {
      integer_roles(a, roles);
    }
  }
}

// Values worth trying for an integer of a given role, on tensors of size 4.
const std::vector<int64_t>& domain_of(const std::string& role) {
  static const std::map<std::string, std::vector<int64_t>> domains = {
      {"dim", {-1, 0, 1, 2, 3}},
      {"axis", {-1, 0, 1, 2, 3}},
      {"degree", {1, 2, 2, 4}},
      {"activation", {0, 1, 2, 3, 4}},
      {"perm", {110, 1021, 1102, 1120, 1201, 1210, 101, 1012, 10123, 10132, 13210, 12301}},
      {"shape", {10016, 100020008, 100080002, 100040004, 1000200020004, 10064, 100160004, 100040016,
                 1000400040004, 1000200080004, 10256, 100160016, 1000400040016, 10004000400040004}},
      {"eps", {std::bit_cast<int64_t>(1e-5), std::bit_cast<int64_t>(0.5)}},
      {"rate", {std::bit_cast<int64_t>(0.1), std::bit_cast<int64_t>(0.5), std::bit_cast<int64_t>(0.0)}},
      {"seed", {0, 1, 7}},
      {"blocks", {1, 2, 4}},
      {"scalar_num", {-1, 1, 2, 3}},
      {"scalar_den", {1, 2, 4}},
      {"stride_h", {0, 1, 2}}, {"stride_w", {0, 1, 2}}, {"pad_h", {0, 1}}, {"pad_w", {0, 1}},
      {"kernel_h", {1, 2, 3}}, {"kernel_w", {1, 2, 3}}, {"groups", {1, 2}}, {"mode", {0, 1}},
  };
  static const std::vector<int64_t> other = {-1, 0, 1, 2};
  auto it = domains.find(role);
  return it == domains.end() ? other : it->second;
}

using State = AxiomInstances::State;

const std::vector<State>& all_states() {
  static const std::vector<State> states = [] {
    std::vector<State> out;
    for (int rank = 1; rank <= 4; ++rank)
      for (int split = 0; split < (1 << rank); ++split)
        for (int64_t replica : {1, 2})
          for (bool index : {false, true}) {
            State s{ParallelTensorShape::unpartitioned(std::vector<int64_t>(static_cast<size_t>(rank), 4)), index ? 4 : 0};
            for (int j = 0; j < rank; ++j)
              if (split & (1 << j)) s.shape.dims[static_cast<size_t>(j)].degree = 2;
            s.shape.replica = replica;
            if (index) s.shape.dtype = DataType::kInt64;
            out.push_back(std::move(s));
          }
    return out;
  }();
  return states;
}

// The kinds of states rules meet: rank 1 to 4, every size 4, each
// dimension split 2 ways or not, replicated twice or not; one in five holds
// int64 indices in [0, 4) (for Embedding and the loss labels).
// Of a given rank and element type when `rank` > 0.
State random_state(std::mt19937_64& rng, int rank = 0, std::optional<DataType> type = std::nullopt) {
  if (rank <= 0) rank = 1 + static_cast<int>(rng() % 4);
  State r{ParallelTensorShape::unpartitioned(std::vector<int64_t>(static_cast<size_t>(rank), 4)), 0};
  for (auto& d : r.shape.dims)
    if (rng() % 3 == 0) d.degree = 2;
  if (rng() % 3 == 0) r.shape.replica = 2;
  if (type ? *type == DataType::kInt64 : rng() % 5 == 0) {
    r.shape.dtype = DataType::kInt64;
    r.index_range = 4;
  }
  return r;
}

// The variables of e, each once.
void variables(const z3::expr& e, std::vector<unsigned>& out) {
  if (is_var(e)) {
    if (std::find(out.begin(), out.end(), var_index(e)) == out.end()) out.push_back(var_index(e));
    return;
  }
  if (e.is_app())
    for (unsigned i = 0; i < e.num_args(); ++i) variables(e.arg(i), out);
}

// Values tried per search before giving up; after the first searches, an
// axiom fewer than one in ten searches found an instance of is drawn
// independently only: an
// operator of many operands (BatchNorm's five) is checked only once all are
// bound, which a depth-first search does not reach in its budget, while
// independent draws that often give operands one state do.
constexpr int64_t kBudget = 500;
constexpr int kFruitlessSearches = 10;
// Values one variable tries before its search backtracks further: a wrong
// choice early (a tensor no operator around it accepts) must not use up
// the whole budget below it.
constexpr size_t kBreadth = 40;  // searches before their yield counts

}  // namespace

AxiomInstances::AxiomInstances(Terms& terms, const Axiom& axiom) : T_(terms), axiom_(axiom) {
  std::map<unsigned, std::string> roles;
  integer_roles(axiom.lhs, roles);
  integer_roles(axiom.rhs, roles);
  if (axiom.pre) integer_roles(*axiom.pre, roles);
  // Inner subterms first, so a variable is bound right after the ones the
  // operators around it constrain it with.
  collect(axiom.lhs, true);
  collect(axiom.rhs, true);
  if (axiom.pre) collect(*axiom.pre, true);
  for (const Check& c : checks_) variables(c.e, order_);
  for (unsigned v = 0; v < axiom.tensor_var.size(); ++v)
    if (std::find(order_.begin(), order_.end(), v) == order_.end()) order_.push_back(v);
  int_values_.resize(axiom.tensor_var.size());
  for (unsigned v = 0; v < axiom.tensor_var.size(); ++v) {
    if (axiom.tensor_var[v]) continue;
    auto role = roles.find(v);
    std::vector<int64_t> values = domain_of(role == roles.end() ? "" : role->second);
    std::sort(values.begin(), values.end());
    values.erase(std::unique(values.begin(), values.end()), values.end());
    int_values_[v] = std::move(values);
  }
  checks_at_.resize(order_.size());
  for (size_t i = 0; i < checks_.size(); ++i) {
    std::vector<unsigned> vs;
    variables(checks_[i].e, vs);
    size_t last = 0;
    for (unsigned v : vs) last = std::max(last, static_cast<size_t>(std::find(order_.begin(), order_.end(), v) - order_.begin()));
    if (!vs.empty()) checks_at_[last].push_back(i);
  }
}

void AxiomInstances::collect(const z3::expr& e, bool top) {
  if (!e.is_app() || is_var(e)) return;
  if (e.get_sort().is_bool()) {
    // Conjuncts of the precondition are checked one by one (an `and` as a
    // whole is decided only once all of its variables are bound).
    if (e.decl().decl_kind() == Z3_OP_AND) {
      for (unsigned i = 0; i < e.num_args(); ++i) collect(e.arg(i), true);
      return;
    }
    if (top) checks_.push_back({e, false});
    return;
  }
  if (!z3::eq(e.get_sort(), T_.tensor())) return;
  for (unsigned i = 0; i < e.num_args(); ++i) collect(e.arg(i), false);
  checks_.push_back({e, true});
}

bool AxiomInstances::holds(const Check& c, const Bindings& b) {
  if (!c.tensor) {
    const auto v = T_.eval_bool(c.e, b);
    return v && *v;
  }
  const auto t = T_.instantiate(c.e, b);
  return t && T_.shape(*t);
}

bool AxiomInstances::sides_agree(const Bindings& b) {
  // Both sides legal is not enough: they must have one parallel shape.
  const auto l = T_.instantiate(axiom_.lhs, b), r = T_.instantiate(axiom_.rhs, b);
  const auto sl = l ? T_.shape(*l) : std::nullopt, sr = r ? T_.shape(*r) : std::nullopt;
  return sl && sr && *sl == *sr;
}

void AxiomInstances::bind_tensor(unsigned v, const State& s, Bindings& b) {
  const std::string name = "v" + std::to_string(v);
  T_.set_input(name, s.shape, s.index_range);
  b[v] = T_.ctx().constant(name.c_str(), T_.tensor());
}

bool AxiomInstances::bind_independently(std::mt19937_64& rng, Bindings& b) {
  // Tensors often share a state (operands of one operator must agree).
  const State shared = random_state(rng);
  int previous = -1;  // the tensor variable bound last
  for (unsigned v = 0; v < b.size(); ++v) {
    if (axiom_.tensor_var[v]) {
      const Kind& kind = learned_[v];
      State s;
      if (kind.rank > 0 && rng() % 4 != 0) {  // mostly the rank and type an instance had
        const bool alike = previous >= 0 && learned_[static_cast<size_t>(previous)].rank == kind.rank &&
                           learned_[static_cast<size_t>(previous)].type == kind.type;
        s = alike && rng() % 2 ? drawn_[static_cast<size_t>(previous)] : random_state(rng, kind.rank, kind.type);
      } else {
        s = rng() % 2 ? shared : random_state(rng);
      }
      bind_tensor(v, s, b);
      drawn_[v] = std::move(s);
      previous = static_cast<int>(v);
    } else {
      const auto& values = int_values_[v];
      b[v] = T_.ctx().int_val(values[rng() % values.size()]);
    }
  }
  for (const Check& c : checks_)
    if (!holds(c, b)) return false;
  return sides_agree(b);
}

bool AxiomInstances::bind(size_t k, std::mt19937_64& rng, Bindings& b) {
  if (k == order_.size()) return sides_agree(b);
  const unsigned v = order_[k];
  const bool tensor = axiom_.tensor_var[v];
  const size_t n = tensor ? all_states().size() : int_values_[v].size();
  std::vector<size_t> tries(n);
  std::iota(tries.begin(), tries.end(), size_t{0});
  std::shuffle(tries.begin(), tries.end(), rng);
  if (tensor) {  // the states of the tensors bound so far first, latest first: operands of one operator often agree
    auto front = tries.begin();
    for (size_t j = k; j-- > 0;)
      if (const int st = state_of_[order_[j]]; st >= 0)
        if (auto at = std::find(front, tries.end(), static_cast<size_t>(st)); at != tries.end()) std::rotate(front, at, at + 1), ++front;
    // Then the rank and type this variable had in an instance found before.
    if (const Kind& kind = learned_[v]; kind.rank > 0)
      std::stable_partition(front, tries.end(), [&](size_t i) {
        const auto& sh = all_states()[i].shape;
        return sh.rank() == kind.rank && sh.dtype == kind.type;
      });
  }
  size_t tried = 0;
  for (size_t i : tries) {
    if (++budget_ > kBudget || ++tried > kBreadth) break;
    if (tensor) {
      bind_tensor(v, all_states()[i], b);
      state_of_[v] = static_cast<int>(i);
    } else {
      b[v] = T_.ctx().int_val(int_values_[v][i]);
    }
    bool ok = true;
    for (size_t c : checks_at_[k])
      if (!(ok = holds(checks_[c], b))) break;
    if (ok && bind(k + 1, rng, b)) return true;
  }
  b[v].reset();
  if (tensor) state_of_[v] = -1;
  return false;
}

bool AxiomInstances::draw(std::mt19937_64& rng, Bindings& b, std::string& description, z3::expr& lhs, z3::expr& rhs) {
  T_.clear_inputs();
  b.assign(axiom_.tensor_var.size(), std::nullopt);
  state_of_.assign(axiom_.tensor_var.size(), -1);
  learned_.resize(axiom_.tensor_var.size());
  drawn_.resize(axiom_.tensor_var.size());
  // Searches and independent draws take turns, unless searches find nothing.
  bool found;
  if ((searches_ < kFruitlessSearches || searches_found_ * 10 >= searches_) && draws_++ % 2 == 0) {
    budget_ = 0;
    found = bind(0, rng, b);
    ++searches_, searches_found_ += found;
  } else {
    found = bind_independently(rng, b);
  }
  if (!found) return false;
  for (unsigned v = 0; v < b.size(); ++v)
    if (axiom_.tensor_var[v]) {
      const auto sh = T_.shape(*b[v]);
      learned_[v] = {sh->rank(), sh->dtype};
    }
  lhs = *T_.instantiate(axiom_.lhs, b), rhs = *T_.instantiate(axiom_.rhs, b);
  description.clear();
  for (unsigned v = 0; v < b.size(); ++v) {
    const std::string name = "v" + std::to_string(v);
    if (axiom_.tensor_var[v]) {
      const auto s = T_.shape(*b[v]);
      description += name + " = " + (s ? s->to_string() : "?") + "; ";
    } else {
      description += "i" + std::to_string(v) + " = " + std::to_string(b[v]->get_numeral_int64()) + "; ";
    }
  }
  return true;
}

}  // namespace pcgx::verify
