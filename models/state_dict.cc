#include "models/state_dict.h"

#include <caffe2/serialize/inline_container.h>
#include <torch/serialize.h>
#include <torch/torch.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <unordered_map>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "p3/base/file_util.h"

namespace p3::models {
namespace {

std::string ShapeText(const torch::Tensor& t) {
  return absl::StrCat("[", absl::StrJoin(t.sizes(), ", "), "]");
}

// --- Reading torch.save's zip archive -------------------------------------------------
//
// libtorch's torch::pickle_load turns the collections.OrderedDict that Python's
// state_dict() returns into None (it only expects one as a tensor's empty backward hooks),
// so the archive's data.pkl is read here by a small pickle machine that knows the opcodes
// torch.save emits (protocol 2) and the globals a state dict holds. Storages come from the
// archive's data/<key> records.

struct PyObj;
using PyRef = std::shared_ptr<PyObj>;

struct PyObj {
  enum class Kind {
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kTuple,
    kList,
    kDict,
    kGlobal,
    kTensor,
    kStorage,
    kMark
  };
  Kind kind = Kind::kNone;
  int64_t i = 0;
  double f = 0;
  std::string s;                              // string; global "module.name"
  std::vector<PyRef> items;                   // tuple, list
  std::vector<std::pair<PyRef, PyRef>> dict;  // dict, in insertion order
  torch::Tensor tensor;                       // tensor; storage (1-d, its dtype)
};

PyRef Make(PyObj::Kind kind) {
  auto o = std::make_shared<PyObj>();
  o->kind = kind;
  return o;
}

class PickleReader {
 public:
  PickleReader(const std::string& data, caffe2::serialize::PyTorchStreamReader* archive)
      : data_(data), archive_(archive) {}

  // The pickled object; throws std::runtime_error naming what is not understood.
  PyRef Read() {
    while (true) {
      const uint8_t op = Byte();
      switch (op) {
        case 0x80:
          Byte();
          break;     // PROTO
        case '.': {  // STOP
          if (stack_.size() != 1) Fail("unbalanced stack at STOP");
          return stack_.back();
        }
        case '(':
          stack_.push_back(Make(PyObj::Kind::kMark));
          break;  // MARK
        case 'N':
          stack_.push_back(Make(PyObj::Kind::kNone));
          break;
        case 0x88:
        case 0x89: {  // NEWTRUE, NEWFALSE
          PyRef o = Make(PyObj::Kind::kBool);
          o->i = op == 0x88;
          stack_.push_back(o);
          break;
        }
        case 'J':
          PushInt(static_cast<int32_t>(Le(4)));
          break;  // BININT
        case 'K':
          PushInt(static_cast<int64_t>(Le(1)));
          break;  // BININT1
        case 'M':
          PushInt(static_cast<int64_t>(Le(2)));
          break;      // BININT2
        case 0x8a: {  // LONG1
          const size_t n = Le(1);
          if (n > 8) Fail("integer wider than 64 bits");
          uint64_t v = Le(n);
          if (n > 0 && n < 8 && (v >> (8 * n - 1)) != 0) v |= ~uint64_t{0} << (8 * n);
          PushInt(static_cast<int64_t>(v));
          break;
        }
        case 'G': {  // BINFLOAT, big-endian
          uint64_t bits = 0;
          for (int k = 0; k < 8; ++k) bits = (bits << 8) | Byte();
          PyRef o = Make(PyObj::Kind::kFloat);
          std::memcpy(&o->f, &bits, sizeof(bits));
          stack_.push_back(o);
          break;
        }
        case 'X':
          PushString(Le(4));
          break;  // BINUNICODE
        case 0x8c:
          PushString(Le(1));
          break;  // SHORT_BINUNICODE
        case 'U':
          PushString(Le(1));
          break;  // SHORT_BINSTRING
        case 'T':
          PushString(Le(4));
          break;     // BINSTRING
        case 'c': {  // GLOBAL "module\nname\n"
          PyRef o = Make(PyObj::Kind::kGlobal);
          o->s = Line();  // the module first: not one expression, whose order is open
          o->s += "." + Line();
          stack_.push_back(o);
          break;
        }
        case ')':
          stack_.push_back(Make(PyObj::Kind::kTuple));
          break;  // EMPTY_TUPLE
        case 0x85:
        case 0x86:
        case 0x87: {  // TUPLE1..3
          PyRef o = Make(PyObj::Kind::kTuple);
          const size_t n = op - 0x84;
          if (stack_.size() < n) Fail("stack underflow");
          o->items.assign(stack_.end() - n, stack_.end());
          stack_.resize(stack_.size() - n);
          stack_.push_back(o);
          break;
        }
        case 't': {  // TUPLE
          PyRef o = Make(PyObj::Kind::kTuple);
          o->items = PopToMark();
          stack_.push_back(o);
          break;
        }
        case ']':
          stack_.push_back(Make(PyObj::Kind::kList));
          break;     // EMPTY_LIST
        case 'a': {  // APPEND
          PyRef v = Pop();
          Top(PyObj::Kind::kList)->items.push_back(v);
          break;
        }
        case 'e': {  // APPENDS
          std::vector<PyRef> vs = PopToMark();
          PyRef list = Top(PyObj::Kind::kList);
          list->items.insert(list->items.end(), vs.begin(), vs.end());
          break;
        }
        case '}':
          stack_.push_back(Make(PyObj::Kind::kDict));
          break;     // EMPTY_DICT
        case 's': {  // SETITEM
          PyRef v = Pop();
          PyRef k = Pop();
          Top(PyObj::Kind::kDict)->dict.emplace_back(k, v);
          break;
        }
        case 'u': {  // SETITEMS
          std::vector<PyRef> kv = PopToMark();
          if (kv.size() % 2 != 0) Fail("odd SETITEMS");
          PyRef d = Top(PyObj::Kind::kDict);
          for (size_t k = 0; k < kv.size(); k += 2) d->dict.emplace_back(kv[k], kv[k + 1]);
          break;
        }
        case 'q':
          memo_[Le(1)] = Peek();
          break;  // BINPUT
        case 'r':
          memo_[Le(4)] = Peek();
          break;  // LONG_BINPUT
        case 'h':
          stack_.push_back(Memo(Le(1)));
          break;  // BINGET
        case 'j':
          stack_.push_back(Memo(Le(4)));
          break;  // LONG_BINGET
        case 'Q':
          stack_.push_back(Storage(Pop()));
          break;     // BINPERSID
        case 'R': {  // REDUCE
          PyRef args = Pop();
          PyRef fn = Pop();
          stack_.push_back(Call(fn, args));
          break;
        }
        case 'b':
          Pop();
          break;  // BUILD: an OrderedDict's _metadata, not needed
        default:
          Fail("unsupported pickle opcode " + std::to_string(op));
      }
    }
  }

 private:
  [[noreturn]] void Fail(const std::string& what) const {
    throw std::runtime_error(what + " at byte " + std::to_string(pos_));
  }
  uint8_t Byte() {
    if (pos_ >= data_.size()) Fail("truncated pickle");
    return static_cast<uint8_t>(data_[pos_++]);
  }
  uint64_t Le(size_t n) {
    uint64_t v = 0;
    for (size_t k = 0; k < n; ++k) v |= static_cast<uint64_t>(Byte()) << (8 * k);
    return v;
  }
  std::string Line() {
    const size_t end = data_.find('\n', pos_);
    if (end == std::string::npos) Fail("truncated GLOBAL");
    std::string s = data_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return s;
  }
  void PushInt(int64_t v) {
    PyRef o = Make(PyObj::Kind::kInt);
    o->i = v;
    stack_.push_back(o);
  }
  void PushString(size_t n) {
    if (n > data_.size() - pos_) Fail("truncated string");
    PyRef o = Make(PyObj::Kind::kString);
    o->s = data_.substr(pos_, n);
    pos_ += n;
    stack_.push_back(o);
  }
  PyRef Pop() {
    if (stack_.empty() || stack_.back()->kind == PyObj::Kind::kMark) Fail("stack underflow");
    PyRef o = stack_.back();
    stack_.pop_back();
    return o;
  }
  PyRef Peek() {
    if (stack_.empty()) Fail("stack underflow");
    return stack_.back();
  }
  PyRef Top(PyObj::Kind kind) {
    PyRef o = Peek();
    if (o->kind != kind) Fail("unexpected object kind");
    return o;
  }
  PyRef Memo(uint64_t key) {
    auto it = memo_.find(key);
    if (it == memo_.end()) Fail("unknown memo key");
    return it->second;
  }
  std::vector<PyRef> PopToMark() {
    size_t k = stack_.size();
    while (k > 0 && stack_[k - 1]->kind != PyObj::Kind::kMark) --k;
    if (k == 0) Fail("MARK missing");
    std::vector<PyRef> out(stack_.begin() + k, stack_.end());
    stack_.resize(k - 1);
    return out;
  }
  static int64_t Int(const PyRef& o) {
    if (o->kind != PyObj::Kind::kInt && o->kind != PyObj::Kind::kBool) {
      throw std::runtime_error("expected an integer");
    }
    return o->i;
  }
  static std::vector<int64_t> Ints(const PyRef& o) {
    if (o->kind != PyObj::Kind::kTuple) throw std::runtime_error("expected a tuple");
    std::vector<int64_t> out;
    for (const PyRef& v : o->items) out.push_back(Int(v));
    return out;
  }

  // ('storage', torch.<Type>Storage, key, location, numel) -> a 1-d tensor of the record.
  PyRef Storage(const PyRef& pid) {
    if (pid->kind != PyObj::Kind::kTuple || pid->items.size() != 5 ||
        pid->items[0]->s != "storage" || pid->items[1]->kind != PyObj::Kind::kGlobal) {
      Fail("unsupported persistent id");
    }
    static const std::map<std::string, torch::ScalarType> kTypes = {
        {"torch.FloatStorage", torch::kFloat32}, {"torch.DoubleStorage", torch::kFloat64},
        {"torch.HalfStorage", torch::kFloat16},  {"torch.BFloat16Storage", torch::kBFloat16},
        {"torch.LongStorage", torch::kInt64},    {"torch.IntStorage", torch::kInt32},
        {"torch.ShortStorage", torch::kInt16},   {"torch.CharStorage", torch::kInt8},
        {"torch.ByteStorage", torch::kUInt8},    {"torch.BoolStorage", torch::kBool}};
    auto type = kTypes.find(pid->items[1]->s);
    if (type == kTypes.end()) Fail("unsupported storage type " + pid->items[1]->s);
    const std::string key = pid->items[2]->s;
    auto cached = storages_.find(key);
    if (cached != storages_.end()) return cached->second;
    auto [ptr, bytes] = archive_->getRecord("data/" + key);
    const int64_t numel = Int(pid->items[4]);
    const int64_t item = static_cast<int64_t>(c10::elementSize(type->second));
    if (static_cast<int64_t>(bytes) < numel * item) Fail("storage " + key + " is truncated");
    PyRef o = Make(PyObj::Kind::kStorage);
    o->tensor =
        torch::from_blob(ptr.get(), {numel}, torch::TensorOptions().dtype(type->second)).clone();
    storages_[key] = o;
    return o;
  }

  PyRef Call(const PyRef& fn, const PyRef& args) {
    if (fn->kind != PyObj::Kind::kGlobal || args->kind != PyObj::Kind::kTuple) {
      Fail("unsupported REDUCE");
    }
    const std::vector<PyRef>& a = args->items;
    if (fn->s == "collections.OrderedDict") return Make(PyObj::Kind::kDict);
    if (fn->s == "torch._utils._rebuild_tensor_v2" && a.size() >= 4 &&
        a[0]->kind == PyObj::Kind::kStorage) {
      PyRef o = Make(PyObj::Kind::kTensor);
      o->tensor = a[0]->tensor.as_strided(Ints(a[2]), Ints(a[3]), Int(a[1]));
      return o;
    }
    // libtorch's pickler (WriteStateDict) tags a dict with its type: (dict, "Dict[...]").
    if (fn->s == "torch.jit._pickle.restore_type_tag" && !a.empty()) return a[0];
    if (fn->s == "torch._utils._rebuild_parameter" && !a.empty() &&
        a[0]->kind == PyObj::Kind::kTensor) {
      return a[0];
    }
    Fail("unsupported global " + fn->s);
  }

  const std::string& data_;
  caffe2::serialize::PyTorchStreamReader* archive_;
  size_t pos_ = 0;
  std::vector<PyRef> stack_;
  std::unordered_map<uint64_t, PyRef> memo_;
  std::unordered_map<std::string, PyRef> storages_;
};

}  // namespace

StateDict ModuleState(torch::nn::Module& module) {
  StateDict state;
  for (const auto& item : module.named_modules()) {
    const std::string prefix = item.key().empty() ? "" : item.key() + ".";
    for (const auto& p : item.value()->named_parameters(/*recurse=*/false)) {
      state.emplace_back(prefix + p.key(), p.value());
    }
    for (const auto& b : item.value()->named_buffers(/*recurse=*/false)) {
      state.emplace_back(prefix + b.key(), b.value());
    }
  }
  return state;
}

absl::Status WriteStateDict(const StateDict& state, const std::string& path) {
  std::vector<char> bytes;
  try {
    c10::Dict<std::string, at::Tensor> dict;
    torch::NoGradGuard no_grad;
    for (const auto& [name, tensor] : state) {
      // A copy of its own: pickling a view would write the whole buffer it views.
      dict.insert(name, tensor.detach().to(torch::kCPU).contiguous().clone());
    }
    bytes = torch::pickle_save(dict);
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("cannot serialise the state dict for ", path, ": ",
                                            e.what_without_backtrace()));
  }
  return WriteFileAtomically(path, absl::string_view(bytes.data(), bytes.size()));
}

absl::Status SaveStateDict(torch::nn::Module& module, const std::string& path) {
  return WriteStateDict(ModuleState(module), path);
}

absl::StatusOr<StateDict> ReadStateDict(const std::string& path) {
  // Opened first so that a missing or unreadable file gets a plain error.
  if (std::ifstream probe(path, std::ios::binary); !probe) {
    return absl::NotFoundError(absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
  }
  StateDict state;
  try {
    caffe2::serialize::PyTorchStreamReader archive(path);
    auto [ptr, size] = archive.getRecord("data.pkl");
    const std::string pickle(static_cast<const char*>(ptr.get()), size);
    PickleReader reader(pickle, &archive);
    const PyRef value = reader.Read();
    if (value->kind != PyObj::Kind::kDict) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": not a state dict (a dict of name -> tensor)"));
    }
    for (const auto& [key, v] : value->dict) {
      if (key->kind != PyObj::Kind::kString) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": not a state dict: a key is not a string"));
      }
      if (v->kind != PyObj::Kind::kTensor) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": not a state dict: \"", key->s, "\" is not a tensor"));
      }
      state.emplace_back(key->s, v->tensor);
    }
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(absl::StrCat(
        path,
        ": not a zip archive written by torch.save (PyTorch >= 1.6; the legacy format of "
        "_use_new_zipfile_serialization=False is not read): ",
        e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a state dict written by torch.save: ", e.what()));
  }
  return state;
}

absl::Status CopyStateDict(const StateDict& state, torch::nn::Module& module) {
  const StateDict own = ModuleState(module);
  std::unordered_map<std::string, const torch::Tensor*> given;
  for (const auto& [name, tensor] : state) {
    if (!given.emplace(name, &tensor).second) {
      return absl::InvalidArgumentError(absl::StrCat("\"", name, "\" appears twice"));
    }
  }
  std::unordered_set<std::string> expected;
  for (const auto& [name, tensor] : own) {
    expected.insert(name);
    auto it = given.find(name);
    if (it == given.end()) {
      return absl::InvalidArgumentError(absl::StrCat("missing \"", name, "\" ", ShapeText(tensor)));
    }
    const torch::Tensor& from = *it->second;
    if (from.sizes() != tensor.sizes()) {
      return absl::InvalidArgumentError(absl::StrCat("\"", name, "\": shape ", ShapeText(from),
                                                     " in the file, ", ShapeText(tensor),
                                                     " in the model"));
    }
    if (!torch::isFloatingType(tensor.scalar_type()) && torch::isFloatingType(from.scalar_type())) {
      return absl::InvalidArgumentError(absl::StrCat("\"", name, "\": ", from.scalar_type(),
                                                     " in the file, ", tensor.scalar_type(),
                                                     " in the model"));
    }
  }
  for (const auto& [name, tensor] : state) {
    if (expected.count(name) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("unexpected \"", name, "\" ", ShapeText(tensor)));
    }
  }
  try {
    torch::NoGradGuard no_grad;
    for (auto& [name, tensor] : own) {
      torch::Tensor target = tensor;
      target.copy_(*given.at(name));
    }
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("copying the state dict failed: ", e.what_without_backtrace()));
  }
  return absl::OkStatus();
}

absl::Status LoadStateDict(const std::string& path, torch::nn::Module& module) {
  absl::StatusOr<StateDict> state = ReadStateDict(path);
  if (!state.ok()) return state.status();
  absl::Status copied = CopyStateDict(*state, module);
  if (!copied.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", copied.message()));
  }
  return absl::OkStatus();
}

}  // namespace p3::models
