// Recipe "mtia_elementwise" for the mtia-sim platform: out[i] = expr(inputs[i])
// over float32 tensors of one shape, for tasks with hints {pattern:
// elementwise, expr: <C expression over input names>, out: <output name>}.
//
// The MTIA SIMD engine has no scalar code path, so the C expression is
// compiled here into a straight-line program of SIMD commands (Unary,
// Binary, BinaryScalar, Fill) over local-memory tiles:
//   - + - * /, unary minus, literals (folded when constant);
//   - expf logf tanhf sqrtf fabsf fmaxf fminf on the matching units,
//     expm1f(a) = exp(a) - 1, log1pf(a) = log(1 + a), and erff through
//     Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7) on the odd split
//     erf(y) = E(max(y, 0)) - E(max(-y, 0));
//   - a conditional `x OP c ? A : B` (x an input, c a constant) whose branches
//     agree at x = c (checked numerically) becomes
//     hi(max(x, c)) + lo(min(x, c)) - lo(c), hi/lo being the branch taken
//     above/below c: exact for relu, leaky relu, elu, selu, hardtanh, ...
// Expressions outside this subset make the recipe not apply.
//
// The kernel splits the elements over `pes` PEs in blocks of 8 (so every
// DMA starts 32-byte aligned), and each PE streams tiles of `tile_kib` KiB
// per tensor through `buffers`-slot circular buffers: the loads of the next
// tiles and the store of the previous one overlap the SIMD program.
#include <cctype>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include "coordinator/proposer/builtin/codegen.h"
#include "coordinator/proposer/builtin/mtia_codegen.h"
#include "coordinator/proposer/builtin/recipe.h"

namespace kevo::proposer {
namespace {

// ------------------------------------------------------------------ parsing

struct Node {
  enum Kind { kNum, kVar, kNeg, kBin, kCall, kCond } kind = kNum;
  double num = 0;
  std::string name;  // kVar: input; kCall: function; kBin: operator
  std::vector<std::shared_ptr<Node>> kids;
};
using NodeP = std::shared_ptr<Node>;

class Parser {
 public:
  explicit Parser(const std::string& s) : s_(s) {}

  // The expression, or null if it is outside the supported subset.
  NodeP Parse() {
    NodeP n = Cond();
    Skip();
    return ok_ && pos_ == s_.size() ? n : nullptr;
  }

 private:
  void Skip() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool Eat(const std::string& tok) {
    Skip();
    if (s_.compare(pos_, tok.size(), tok) != 0) return false;
    // "<" must not eat the start of "<=".
    if ((tok == "<" || tok == ">") && pos_ + 1 < s_.size() && s_[pos_ + 1] == '=') return false;
    pos_ += tok.size();
    return true;
  }
  NodeP Make(Node::Kind k, std::string name, std::vector<NodeP> kids) {
    auto n = std::make_shared<Node>();
    n->kind = k;
    n->name = std::move(name);
    n->kids = std::move(kids);
    for (const NodeP& kid : n->kids) ok_ = ok_ && kid != nullptr;
    return n;
  }
  NodeP Cond() {
    NodeP c = Cmp();
    if (!Eat("?")) return c;
    NodeP a = Cond();
    if (!Eat(":")) ok_ = false;
    NodeP b = Cond();
    return Make(Node::kCond, "?", {c, a, b});
  }
  NodeP Cmp() {
    NodeP a = Add();
    for (const char* op : {"<=", ">=", "<", ">"}) {
      if (Eat(op)) return Make(Node::kBin, op, {a, Add()});
    }
    return a;
  }
  NodeP Add() {
    NodeP a = Mul();
    while (ok_) {
      if (Eat("+")) {
        a = Make(Node::kBin, "+", {a, Mul()});
      } else if (Eat("-")) {
        a = Make(Node::kBin, "-", {a, Mul()});
      } else {
        break;
      }
    }
    return a;
  }
  NodeP Mul() {
    NodeP a = Unary();
    while (ok_) {
      if (Eat("*")) {
        a = Make(Node::kBin, "*", {a, Unary()});
      } else if (Eat("/")) {
        a = Make(Node::kBin, "/", {a, Unary()});
      } else {
        break;
      }
    }
    return a;
  }
  NodeP Unary() {
    if (Eat("-")) return Make(Node::kNeg, "-", {Unary()});
    if (Eat("+")) return Unary();
    return Primary();
  }
  NodeP Primary() {
    Skip();
    if (pos_ >= s_.size()) {
      ok_ = false;
      return nullptr;
    }
    if (Eat("(")) {
      NodeP n = Cond();
      if (!Eat(")")) ok_ = false;
      return n;
    }
    const unsigned char c = s_[pos_];
    if (std::isdigit(c) || c == '.') {
      size_t used = 0;
      double v = 0;
      try {
        v = std::stod(s_.substr(pos_), &used);
      } catch (...) {
        ok_ = false;
        return nullptr;
      }
      pos_ += used;
      if (pos_ < s_.size() && (s_[pos_] == 'f' || s_[pos_] == 'F')) ++pos_;
      auto n = Make(Node::kNum, "", {});
      n->num = v;
      return n;
    }
    if (std::isalpha(c) || c == '_') {
      size_t start = pos_;
      while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_')) ++pos_;
      std::string id = s_.substr(start, pos_ - start);
      if (!Eat("(")) return Make(Node::kVar, id, {});
      std::vector<NodeP> args = {Cond()};
      while (ok_ && Eat(",")) args.push_back(Cond());
      if (!Eat(")")) ok_ = false;
      return Make(Node::kCall, id, std::move(args));
    }
    ok_ = false;
    return nullptr;
  }

  const std::string& s_;
  size_t pos_ = 0;
  bool ok_ = true;
};

void Vars(const Node& n, std::set<std::string>* out) {
  if (n.kind == Node::kVar) out->insert(n.name);
  for (const NodeP& k : n.kids) Vars(*k, out);
}

// The value of `n` in double precision with libm (for the continuity check
// and constant folding); nullopt for an unknown name or function.
std::optional<double> Eval(const Node& n, const std::map<std::string, double>& env) {
  std::vector<double> k;
  for (const NodeP& kid : n.kids) {
    std::optional<double> v = Eval(*kid, env);
    if (!v) return std::nullopt;
    k.push_back(*v);
  }
  switch (n.kind) {
    case Node::kNum:
      return n.num;
    case Node::kVar: {
      auto it = env.find(n.name);
      if (it == env.end()) return std::nullopt;
      return it->second;
    }
    case Node::kNeg:
      return -k[0];
    case Node::kCond:
      return k[0] != 0 ? k[1] : k[2];
    case Node::kBin:
      if (n.name == "+") return k[0] + k[1];
      if (n.name == "-") return k[0] - k[1];
      if (n.name == "*") return k[0] * k[1];
      if (n.name == "/") return k[0] / k[1];
      if (n.name == "<") return k[0] < k[1] ? 1.0 : 0.0;
      if (n.name == "<=") return k[0] <= k[1] ? 1.0 : 0.0;
      if (n.name == ">") return k[0] > k[1] ? 1.0 : 0.0;
      if (n.name == ">=") return k[0] >= k[1] ? 1.0 : 0.0;
      return std::nullopt;
    case Node::kCall: {
      const std::string& f = n.name;
      if (k.size() == 1) {
        if (f == "expf") return std::exp(k[0]);
        if (f == "expm1f") return std::expm1(k[0]);
        if (f == "logf") return std::log(k[0]);
        if (f == "log1pf") return std::log1p(k[0]);
        if (f == "tanhf") return std::tanh(k[0]);
        if (f == "sqrtf") return std::sqrt(k[0]);
        if (f == "fabsf") return std::fabs(k[0]);
        if (f == "erff") return std::erf(k[0]);
      } else if (k.size() == 2) {
        if (f == "fmaxf") return std::fmax(k[0], k[1]);
        if (f == "fminf") return std::fmin(k[0], k[1]);
      }
      return std::nullopt;
    }
  }
  return std::nullopt;
}

// ----------------------------------------------------------------- lowering

// An operand: a constant, input tile k or (virtual) temporary k.
struct Value {
  enum Kind { kConst, kInput, kTemp } kind = kConst;
  double c = 0;
  int idx = -1;
};

struct Ins {
  enum Kind { kUnary, kBinary, kScalar } kind;
  std::string op;  // UnaryOp / BinaryOp enumerator
  int dst;         // virtual temporary
  Value a, b;      // b unused for kUnary; b.c is the scalar of kScalar
};

class Lowering {
 public:
  // The program computing `root` with `inputs` as input tiles 0..n-1; false
  // when the expression is outside the subset.
  bool Run(const Node& root, const std::vector<std::string>& inputs) {
    std::map<std::string, Value> env;
    for (size_t i = 0; i < inputs.size(); ++i) env[inputs[i]] = Value{Value::kInput, 0, static_cast<int>(i)};
    std::optional<Value> v = Lower(root, env);
    if (!v) return false;
    result_ = *v;
    return true;
  }
  const std::vector<Ins>& program() const { return prog_; }
  const Value& result() const { return result_; }

 private:
  static Value Const(double c) { return Value{Value::kConst, c, -1}; }

  Value Emit(Ins::Kind kind, const std::string& op, Value a, Value b = {}) {
    Ins ins{kind, op, next_temp_++, a, b};
    prog_.push_back(ins);
    return Value{Value::kTemp, 0, ins.dst};
  }
  Value Unary(const std::string& op, Value a) { return Emit(Ins::kUnary, op, a); }
  // a op b for tiles or constants, folding constants; `op` one of + - * /
  // max min.
  Value Bin(const std::string& op, Value a, Value b) {
    static const std::map<std::string, std::string> kEnum = {{"+", "kAdd"}, {"-", "kSub"},   {"*", "kMul"},
                                                             {"/", "kDiv"}, {"max", "kMax"}, {"min", "kMin"}};
    const bool ca = a.kind == Value::kConst, cb = b.kind == Value::kConst;
    if (ca && cb) {
      const float x = static_cast<float>(a.c), y = static_cast<float>(b.c);  // C float arithmetic
      if (op == "+") return Const(x + y);
      if (op == "-") return Const(x - y);
      if (op == "*") return Const(x * y);
      if (op == "/") return Const(x / y);
      return Const(op == "max" ? std::fmax(x, y) : std::fmin(x, y));
    }
    if (!ca && !cb) return Emit(Ins::kBinary, kEnum.at(op), a, b);
    if (cb) {
      if ((op == "+" || op == "-") && b.c == 0) return a;
      if ((op == "*" || op == "/") && b.c == 1) return a;
      if (op == "-") return Emit(Ins::kScalar, "kAdd", a, Const(-b.c));
      return Emit(Ins::kScalar, kEnum.at(op), a, b);
    }
    // Constant on the left.
    if (op == "-") return Bin("+", Unary("kNeg", b), a);
    if (op == "/") {
      Value r = Unary("kRecip", b);
      return Bin("*", r, a);
    }
    return Bin(op, b, a);  // + * max min commute
  }

  // A & S 7.1.26 for a >= 0: 1 - t(a1 + t(a2 + ... )) exp(-a^2), t = 1/(1 + p a).
  Value ErfNonNegative(Value a) {
    constexpr double kP = 0.3275911;
    constexpr double kA[] = {0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429};
    Value t = Unary("kRecip", Bin("+", Bin("*", a, Const(kP)), Const(1)));
    Value h = Bin("*", t, Const(kA[4]));
    for (int i = 3; i >= 0; --i) h = Bin("*", Bin("+", h, Const(kA[i])), t);
    Value e = Unary("kExp", Unary("kNeg", Bin("*", a, a)));
    return Bin("-", Const(1), Bin("*", h, e));
  }

  std::optional<Value> Lower(const Node& n, const std::map<std::string, Value>& env) {
    if (n.kind == Node::kNum) return Const(n.num);
    if (n.kind == Node::kVar) {
      auto it = env.find(n.name);
      if (it == env.end()) return std::nullopt;
      return it->second;
    }
    if (n.kind == Node::kCond) return LowerCond(n, env);
    std::vector<Value> k;
    for (const NodeP& kid : n.kids) {
      std::optional<Value> v = Lower(*kid, env);
      if (!v) return std::nullopt;
      k.push_back(*v);
    }
    bool all_const = true;
    for (const Value& v : k) all_const = all_const && v.kind == Value::kConst;
    if (n.kind == Node::kNeg) return all_const ? Const(-k[0].c) : Unary("kNeg", k[0]);
    if (n.kind == Node::kBin) {
      if (n.name == "+" || n.name == "-" || n.name == "*" || n.name == "/") return Bin(n.name, k[0], k[1]);
      return std::nullopt;  // a comparison outside a conditional
    }
    // kCall.
    if (all_const) {
      std::map<std::string, double> none;
      std::optional<double> v = Eval(n, none);
      if (!v || !std::isfinite(*v)) return std::nullopt;
      return Const(static_cast<float>(*v));
    }
    const std::string& f = n.name;
    if (k.size() == 2 && (f == "fmaxf" || f == "fminf")) return Bin(f == "fmaxf" ? "max" : "min", k[0], k[1]);
    if (k.size() != 1) return std::nullopt;
    static const std::map<std::string, std::string> kUnaries = {
        {"expf", "kExp"}, {"logf", "kLog"}, {"tanhf", "kTanh"}, {"sqrtf", "kSqrt"}, {"fabsf", "kAbs"}};
    if (auto it = kUnaries.find(f); it != kUnaries.end()) return Unary(it->second, k[0]);
    if (f == "expm1f") return Bin("+", Unary("kExp", k[0]), Const(-1));
    if (f == "log1pf") return Unary("kLog", Bin("+", k[0], Const(1)));
    if (f == "erff") {
      Value pos = ErfNonNegative(Bin("max", k[0], Const(0)));
      Value neg = ErfNonNegative(Bin("max", Unary("kNeg", k[0]), Const(0)));
      return Bin("-", pos, neg);
    }
    return std::nullopt;
  }

  // x OP c ? A : B  ->  hi(max(x, c)) + lo(min(x, c)) - lo(c).
  std::optional<Value> LowerCond(const Node& n, const std::map<std::string, Value>& env) {
    const Node& cmp = *n.kids[0];
    if (cmp.kind != Node::kBin || cmp.name.empty() || (cmp.name[0] != '<' && cmp.name[0] != '>')) {
      return std::nullopt;
    }
    bool var_left = cmp.kids[0]->kind == Node::kVar;
    const Node& var = *cmp.kids[var_left ? 0 : 1];
    const Node& bound = *cmp.kids[var_left ? 1 : 0];
    std::map<std::string, double> no_vars;
    std::optional<double> c = Eval(bound, no_vars);
    if (var.kind != Node::kVar || !c || !std::isfinite(*c) || env.find(var.name) == env.end()) return std::nullopt;
    // "x > c" or "c < x": the true branch is taken above c.
    const bool above = (cmp.name[0] == '>') == var_left;
    const Node& hi = *n.kids[above ? 1 : 2];
    const Node& lo = *n.kids[above ? 2 : 1];
    std::set<std::string> used;
    Vars(hi, &used);
    Vars(lo, &used);
    for (const std::string& u : used) {
      if (u != var.name) return std::nullopt;  // branches must depend on x alone
    }
    const std::map<std::string, double> at_c = {{var.name, static_cast<float>(*c)}};
    std::optional<double> hc = Eval(hi, at_c), lc = Eval(lo, at_c);
    if (!hc || !lc || std::fabs(*hc - *lc) > 1e-6 * std::max(1.0, std::fabs(*hc))) return std::nullopt;
    const Value x = env.at(var.name);
    std::map<std::string, Value> env_hi = env, env_lo = env;
    env_hi[var.name] = Bin("max", x, Const(*c));
    env_lo[var.name] = Bin("min", x, Const(*c));
    std::optional<Value> h = Lower(hi, env_hi);
    if (!h) return std::nullopt;
    std::optional<Value> l = Lower(lo, env_lo);
    if (!l) return std::nullopt;
    if (l->kind == Value::kConst) return h;
    if (h->kind == Value::kConst) return l;
    return Bin("-", Bin("+", *h, *l), Const(static_cast<float>(*lc)));
  }

  std::vector<Ins> prog_;
  int next_temp_ = 0;
  Value result_;
};

// ------------------------------------------------------------------- recipe

struct Binding {
  std::vector<std::string> inputs;  // the expression's inputs, in task order
  std::string out;
  std::vector<std::string> dims;  // the output's shape symbols
  NodeP expr;
};

bool Bind(const v1::Task& task, Binding* b) {
  if (Hint(task, "pattern") != "elementwise") return false;
  b->out = Hint(task, "out", task.outputs_size() == 1 ? task.outputs(0).name() : "");
  const v1::TensorSpec* out = FindOutput(task, b->out);
  if (out == nullptr || out->dtype() != v1::F32 || ParamIndex(task, b->out) < 0) return false;
  for (const std::string& d : out->shape()) {
    if (!IsSymbolParam(task, d)) return false;
    b->dims.push_back(d);
  }
  const std::string text = Hint(task, "expr");
  b->expr = Parser(text).Parse();
  if (b->expr == nullptr) return false;
  std::set<std::string> used;
  Vars(*b->expr, &used);
  for (const auto& in : task.inputs()) {
    if (!used.count(in.name())) continue;
    if (in.dtype() != v1::F32 || in.shape_size() != out->shape_size() || ParamIndex(task, in.name()) < 0) {
      return false;
    }
    for (int i = 0; i < in.shape_size(); ++i) {
      if (in.shape(i) != out->shape(i)) return false;
    }
    b->inputs.push_back(in.name());
  }
  return !b->inputs.empty() && b->inputs.size() == used.size();
}

std::string Operand(const Value& v, const std::vector<int>& phys) {
  if (v.kind == Value::kInput) return absl::StrCat("X(", v.idx, ")");
  return absl::StrCat("T(", phys[v.idx], ")");
}

// A float literal that round-trips (callers have checked it is finite).
std::string FloatLiteral(double c) {
  std::string s = absl::StrFormat("%.9g", static_cast<float>(c));
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s + "f";
}

// The program as C++ statements writing the result into Y, and the number of
// physical temporaries it needs (virtual ones reused once dead).
std::string EmitProgram(const Lowering& l, int* temps) {
  const std::vector<Ins>& prog = l.program();
  const Value& result = l.result();
  // Virtual temp k is instruction k's result.
  std::vector<int> last_use(prog.size(), -1);
  auto uses = [&](const Ins& ins, int i) {
    for (const Value* v : {&ins.a, &ins.b}) {
      if (v->kind == Value::kTemp) last_use[v->idx] = i;
    }
  };
  // Dead code (a branch a conditional folded away) is dropped.
  std::vector<bool> live(prog.size(), false);
  if (result.kind == Value::kTemp) live[result.idx] = true;
  for (size_t i = prog.size(); i-- > 0;) {
    if (!live[i]) continue;
    for (const Value* v : {&prog[i].a, &prog[i].b}) {
      if (v->kind == Value::kTemp) live[v->idx] = true;
    }
  }
  for (size_t i = 0; i < prog.size(); ++i) {
    if (live[i]) uses(prog[i], static_cast<int>(i));
  }
  std::vector<int> phys(prog.size(), -1), free_list;
  int count = 0;
  std::string s;
  for (size_t i = 0; i < prog.size(); ++i) {
    if (!live[i]) continue;
    const Ins& ins = prog[i];
    const std::string a = Operand(ins.a, phys);
    const std::string b = ins.kind == Ins::kBinary ? Operand(ins.b, phys) : "";
    for (const Value* v : {&ins.a, &ins.b}) {
      if (ins.kind != Ins::kBinary && v == &ins.b) continue;
      if (v == &ins.b && ins.b.kind == Value::kTemp && ins.a.kind == Value::kTemp && ins.a.idx == ins.b.idx) {
        continue;  // x * x frees x once
      }
      if (v->kind == Value::kTemp && last_use[v->idx] == static_cast<int>(i)) free_list.push_back(phys[v->idx]);
    }
    std::string dst;
    if (result.kind == Value::kTemp && result.idx == ins.dst) {
      dst = "Y";
    } else {
      if (free_list.empty()) free_list.push_back(count++);
      phys[ins.dst] = free_list.back();
      free_list.pop_back();
      dst = absl::StrCat("T(", phys[ins.dst], ")");
    }
    switch (ins.kind) {
      case Ins::kUnary:
        absl::StrAppend(&s, "      pe.Unary(UnaryOp::", ins.op, ", ", dst, ", ", a, ");\n");
        break;
      case Ins::kBinary:
        absl::StrAppend(&s, "      pe.Binary(BinaryOp::", ins.op, ", ", dst, ", ", a, ", ", b, ");\n");
        break;
      case Ins::kScalar:
        absl::StrAppend(&s, "      pe.BinaryScalar(BinaryOp::", ins.op, ", ", dst, ", ", a, ", ", FloatLiteral(ins.b.c),
                        ");\n");
        break;
    }
  }
  if (result.kind == Value::kInput) absl::StrAppend(&s, "      pe.Unary(UnaryOp::kCopy, Y, X(", result.idx, "));\n");
  if (result.kind == Value::kConst) absl::StrAppend(&s, "      pe.Fill(Y, ", FloatLiteral(result.c), ");\n");
  *temps = count;
  return s;
}

bool Compile(const Binding& b, Lowering* l) {
  if (!l->Run(*b.expr, b.inputs)) return false;
  for (const Ins& ins : l->program()) {
    if (ins.kind == Ins::kScalar && !std::isfinite(static_cast<float>(ins.b.c))) return false;
  }
  return l->result().kind != Value::kConst || std::isfinite(static_cast<float>(l->result().c));
}

class MtiaElementwiseRecipe final : public Recipe {
 public:
  MtiaElementwiseRecipe()
      : space_({
            {"pes", {"1", "8", "16", "32", "64"}, "64", "PEs the elements are split over"},
            {"tile_kib", {"4", "8", "16", "32"}, "16", "KiB per tensor per tile (halved while local memory is short)"},
            {"buffers", {"1", "2", "3", "4"}, "3", "circular-buffer slots: loads run buffers-1 tiles ahead"},
        }) {}

  std::string name() const override { return "mtia_elementwise"; }
  std::string family() const override { return "mtia_elementwise"; }
  std::string description() const override {
    return "MTIA elementwise: the C expression compiled to SIMD commands; elements over PEs, tiles "
           "double-buffered";
  }
  const SearchSpace& space() const override { return space_; }
  std::vector<std::map<std::string, std::string>> SeedOverrides() const override {
    return {{{"buffers", "2"}}, {{"tile_kib", "32"}}};
  }
  bool Applies(const v1::Task& task, std::string_view platform) const override {
    Binding b;
    Lowering l;
    return platform == kMtiaPlatform && Bind(task, &b) && Compile(b, &l);
  }

  absl::StatusOr<v1::Candidate> Generate(const v1::Task& task, const Genome& genome) const override {
    KEVO_RETURN_IF_ERROR(CheckGenerate(*this, task, genome, kMtiaPlatform));
    Binding b;
    Lowering l;
    Bind(task, &b);
    Compile(b, &l);
    int temps = 0;
    const std::string program = EmitProgram(l, &temps);
    const int n_in = static_cast<int>(b.inputs.size());
    std::string s = MtiaPreamble(genome, absl::StrCat("MTIA elementwise ", b.out, " = ", Hint(task, "expr"), ": ",
                                                      l.program().size(), " SIMD commands per tile."));
    absl::StrAppend(&s, "constexpr int64_t kPes = ", IntParam(genome, "pes"),
                    ";\nconstexpr int64_t kTileElems = ", IntParam(genome, "tile_kib") * 256,
                    ";\nconstexpr int64_t kSlots = ", IntParam(genome, "buffers"), ";\nconstexpr int kInputs = ", n_in,
                    ";\nconstexpr int kTemps = ", temps, ";\n}  // namespace\n\n",
                    "extern \"C\" void kevo_mtia_launch(Grid& grid, void** args) {\n");
    absl::StrAppend(&s, "  const Buffer src[kInputs] = {");
    for (int i = 0; i < n_in; ++i) {
      absl::StrAppend(&s, i ? ", " : "", "*static_cast<const Buffer*>(args[", ParamIndex(task, b.inputs[i]), "])");
    }
    absl::StrAppend(&s, "};\n", MtiaBufferArg("out", ParamIndex(task, b.out)), "  int64_t n = 1;\n");
    for (const std::string& d : b.dims) {
      absl::StrAppend(&s, "  n *= *static_cast<const int64_t*>(args[", ParamIndex(task, d), "]);\n");
    }
    absl::StrAppend(&s, R"(  grid.Launch([=](Pe& pe) {
    // This PE's elements: whole blocks of 8, so every DMA starts 32-byte aligned.
    const int64_t pes = std::min<int64_t>(kPes, pe.config().num_pes());
    if (pe.id() >= pes) return;
    const int64_t per_pe = ((n + 7) / 8 + pes - 1) / pes * 8;
    const int64_t e0 = pe.id() * per_pe, e1 = std::min(n, e0 + per_pe);
    if (e0 >= e1) return;
    int64_t te = std::min<int64_t>(kTileElems, (e1 - e0 + 7) / 8 * 8);
    auto need = [&](int64_t t) { return ((kInputs + 1) * kSlots + kTemps) * Round32(t * 4); };
    while (te > 8 && need(te) > pe.LocalFree()) te = std::max<int64_t>(8, te / 16 * 8);
    std::vector<CircularBuffer> in;
    for (int i = 0; i < kInputs; ++i) in.push_back(pe.AllocCircular(te * 4, kSlots));
    const CircularBuffer ob = pe.AllocCircular(te * 4, kSlots);
    std::vector<Buffer> tmp;
    for (int i = 0; i < kTemps; ++i) tmp.push_back(pe.Alloc(te * 4));
    const int64_t tiles = (e1 - e0 + te - 1) / te;
    auto len = [&](int64_t t) { return std::min(te, e1 - (e0 + t * te)); };
    auto load = [&](int64_t t) {
      for (int i = 0; i < kInputs; ++i) {
        pe.Copy(in[i].Slot(t).Slice(0, len(t) * 4), src[i].Slice((e0 + t * te) * 4, len(t) * 4));
      }
    };
    for (int64_t t = 0; t < std::min<int64_t>(kSlots - 1, tiles); ++t) load(t);
    for (int64_t t = 0; t < tiles; ++t) {
      if (t + kSlots - 1 < tiles) load(t + kSlots - 1);  // ahead of this tile's program
      const int64_t m = len(t);
      auto X = [&](int i) { return Tile::Of(in[i].Slot(t), DType::kF32, 1, m); };
      auto T = [&](int i) { return Tile::Of(tmp[i], DType::kF32, 1, m); };
      const Tile Y = Tile::Of(ob.Slot(t), DType::kF32, 1, m);
      (void)X;
      (void)T;
)",
                    program, R"(      pe.Copy(out.Slice((e0 + t * te) * 4, m * 4), ob.Slot(t).Slice(0, m * 4));
    }
  });
}
)");
    return MtiaCandidate(std::move(s));
  }

 private:
  SearchSpace space_;
};

}  // namespace

std::unique_ptr<Recipe> NewMtiaElementwiseRecipe() { return std::make_unique<MtiaElementwiseRecipe>(); }

}  // namespace kevo::proposer
