#include "p3/core/checkpoint.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "p3/base/file_util.h"

namespace p3 {
namespace {

constexpr char kMagic[8] = {'P', '3', 'C', 'K', 'P', 'T', '0', '1'};
// Opens the optional trailer of a re-planned run's checkpoint (the plan).
constexpr char kPlanTag[4] = {'P', 'L', 'A', 'N'};
constexpr char kMembershipTag[4] = {'M', 'E', 'M', 'B'};

uint64_t Fnv1a(const std::string& data) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : data) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

template <typename T>
void Put(std::string* out, T value) {
  out->append(reinterpret_cast<const char*>(&value), sizeof(T));
}

void PutFloats(std::string* out, const std::vector<float>& v) {
  out->append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

class Reader {
 public:
  explicit Reader(const std::string& data) : data_(data) {}
  template <typename T>
  bool Get(T* value) {
    if (pos_ + sizeof(T) > data_.size()) return false;
    std::memcpy(value, data_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  bool GetFloats(int64_t n, std::vector<float>* v) {
    if (n < 0 || pos_ + static_cast<size_t>(n) * sizeof(float) > data_.size()) return false;
    v->resize(n);
    std::memcpy(v->data(), data_.data() + pos_, n * sizeof(float));
    pos_ += n * sizeof(float);
    return true;
  }
  bool done() const { return pos_ == data_.size(); }

 private:
  const std::string& data_;
  size_t pos_ = 0;
};

absl::Status Errno(const std::string& what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

absl::Status MakeDirs(const std::string& dir) {
  std::string path;
  for (size_t i = 0; i <= dir.size(); ++i) {
    if (i == dir.size() || dir[i] == '/') {
      path = dir.substr(0, i);
      if (!path.empty() && mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
        return Errno(absl::StrCat("cannot create ", path));
      }
    }
  }
  return absl::OkStatus();
}

std::string FileName(uint64_t iteration) { return absl::StrFormat("ckpt_%09d.bin", iteration); }

// Iterations of the files named ckpt_<n>.bin in `dir`, newest first.
std::vector<uint64_t> ListCheckpoints(const std::string& dir) {
  std::vector<uint64_t> found;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return found;
  while (dirent* e = readdir(d)) {
    absl::string_view name = e->d_name;
    uint64_t n = 0;
    if (absl::ConsumePrefix(&name, "ckpt_") && absl::ConsumeSuffix(&name, ".bin") &&
        absl::SimpleAtoi(name, &n)) {
      found.push_back(n);
    }
  }
  closedir(d);
  std::sort(found.rbegin(), found.rend());
  return found;
}

}  // namespace

absl::Status WriteCheckpoint(const ShardCheckpoint& ckpt, const std::string& dir, int keep) {
  std::string payload;
  Put<uint64_t>(&payload, ckpt.iteration);
  Put<int32_t>(&payload, ckpt.server_index);
  Put<uint32_t>(&payload, static_cast<uint32_t>(ckpt.slices.size()));
  for (const SliceCheckpoint& s : ckpt.slices) {
    const int64_t n = static_cast<int64_t>(s.params.size());
    Put<int32_t>(&payload, s.slice_id);
    Put<int64_t>(&payload, n);
    Put<int64_t>(&payload, s.optimizer.steps);
    const bool has_buf = !s.optimizer.buf.empty();
    const bool has_buf_sq = !s.optimizer.buf_sq.empty();
    Put<uint8_t>(&payload, has_buf);
    Put<uint8_t>(&payload, has_buf_sq);
    PutFloats(&payload, s.params);
    if (has_buf) PutFloats(&payload, s.optimizer.buf);
    if (has_buf_sq) PutFloats(&payload, s.optimizer.buf_sq);
  }
  if (ckpt.slice_params != 0 || ckpt.replan_slice_params != 0) {
    payload.append(kPlanTag, sizeof(kPlanTag));
    Put<int64_t>(&payload, ckpt.slice_params);
    Put<int64_t>(&payload, ckpt.replan_slice_params);
  }
  if (!ckpt.membership.empty()) {
    payload.append(kMembershipTag, sizeof(kMembershipTag));
    Put<uint32_t>(&payload, static_cast<uint32_t>(ckpt.membership.size()));
    for (const MembershipChange& c : ckpt.membership) {
      Put<uint64_t>(&payload, c.from_iteration);
      Put<uint32_t>(&payload, static_cast<uint32_t>(c.present.size()));
      for (int rank : c.present) Put<int32_t>(&payload, rank);
    }
  }
  std::string file(kMagic, sizeof(kMagic));
  Put<uint64_t>(&file, payload.size());
  Put<uint64_t>(&file, Fnv1a(payload));
  file += payload;

  if (absl::Status s = MakeDirs(dir); !s.ok()) return s;
  const std::string final_path = absl::StrCat(dir, "/", FileName(ckpt.iteration));
  // Durable before the older checkpoints are pruned: a crash never leaves fewer than one.
  if (absl::Status s = WriteFileAtomically(final_path, file, {.sync = true}); !s.ok()) return s;
  std::vector<uint64_t> all = ListCheckpoints(dir);
  for (size_t i = std::max(keep, 1); i < all.size(); ++i) {
    unlink(absl::StrCat(dir, "/", FileName(all[i])).c_str());
  }
  return absl::OkStatus();
}

absl::StatusOr<ShardCheckpoint> ReadCheckpoint(const std::string& path) {
  absl::StatusOr<std::string> read = ReadFile(path);
  if (!read.ok()) return read.status();
  const std::string& file = *read;
  auto corrupt = [&](const std::string& why) {
    return absl::DataLossError(absl::StrCat(path, ": ", why));
  };
  if (file.size() < sizeof(kMagic) + 16 || std::memcmp(file.data(), kMagic, sizeof(kMagic)) != 0) {
    return corrupt("not a p3 checkpoint (bad magic or too short)");
  }
  uint64_t size = 0, hash = 0;
  std::memcpy(&size, file.data() + 8, 8);
  std::memcpy(&hash, file.data() + 16, 8);
  const std::string payload = file.substr(24);
  if (payload.size() != size) {
    return corrupt(absl::StrCat("truncated: ", payload.size(), " of ", size, " bytes"));
  }
  if (Fnv1a(payload) != hash) return corrupt("checksum mismatch");
  Reader r(payload);
  ShardCheckpoint ckpt;
  int32_t server = 0;
  uint32_t count = 0;
  if (!r.Get(&ckpt.iteration) || !r.Get(&server) || !r.Get(&count)) return corrupt("short header");
  ckpt.server_index = server;
  for (uint32_t i = 0; i < count; ++i) {
    SliceCheckpoint s;
    int32_t id = 0;
    int64_t n = 0;
    uint8_t has_buf = 0, has_buf_sq = 0;
    if (!r.Get(&id) || !r.Get(&n) || !r.Get(&s.optimizer.steps) || !r.Get(&has_buf) ||
        !r.Get(&has_buf_sq) || !r.GetFloats(n, &s.params) ||
        (has_buf && !r.GetFloats(n, &s.optimizer.buf)) ||
        (has_buf_sq && !r.GetFloats(n, &s.optimizer.buf_sq))) {
      return corrupt(absl::StrCat("short slice record ", i));
    }
    s.slice_id = id;
    ckpt.slices.push_back(std::move(s));
  }
  // The optional sections, in this order: PLAN, MEMB.
  bool plan_read = false;
  while (!r.done()) {
    char tag[sizeof(kPlanTag)];
    if (!r.Get(&tag)) return corrupt("trailing bytes");
    if (!plan_read && ckpt.membership.empty() &&
        std::memcmp(tag, kPlanTag, sizeof(kPlanTag)) == 0) {
      if (!r.Get(&ckpt.slice_params) || !r.Get(&ckpt.replan_slice_params) ||
          ckpt.slice_params < 0 || ckpt.replan_slice_params < 0) {
        return corrupt("trailing bytes");
      }
      plan_read = true;
    } else if (ckpt.membership.empty() &&
               std::memcmp(tag, kMembershipTag, sizeof(kMembershipTag)) == 0) {
      uint32_t changes = 0;
      if (!r.Get(&changes) || changes == 0) return corrupt("bad membership record");
      for (uint32_t i = 0; i < changes; ++i) {
        MembershipChange c;
        uint32_t ranks = 0;
        if (!r.Get(&c.from_iteration) || !r.Get(&ranks) || ranks > (1u << 16)) {
          return corrupt("bad membership record");
        }
        for (uint32_t k = 0; k < ranks; ++k) {
          int32_t rank = 0;
          if (!r.Get(&rank)) return corrupt("bad membership record");
          c.present.push_back(rank);
        }
        ckpt.membership.push_back(std::move(c));
      }
    } else {
      return corrupt("trailing bytes");
    }
  }
  return ckpt;
}

absl::StatusOr<ShardCheckpoint> ReadLatestCheckpoint(const std::string& dir, uint64_t iteration) {
  std::vector<uint64_t> all = ListCheckpoints(dir);
  std::string skipped;
  for (uint64_t n : all) {
    if (iteration != 0 && n != iteration) continue;
    absl::StatusOr<ShardCheckpoint> ckpt = ReadCheckpoint(absl::StrCat(dir, "/", FileName(n)));
    if (ckpt.ok()) return ckpt;
    absl::StrAppend(&skipped, "; skipped ", ckpt.status().message());
  }
  if (iteration != 0) {
    return absl::NotFoundError(
        absl::StrCat("no valid checkpoint of iteration ", iteration, " in ", dir, skipped));
  }
  return absl::NotFoundError(absl::StrCat("no valid checkpoint in ", dir, skipped));
}

uint64_t NewestCommonCheckpoint(const std::string& root, int servers, std::string* passed_over) {
  if (servers <= 0) return 0;
  // Iterations present on every server, newest first.
  std::vector<uint64_t> common = ListCheckpoints(absl::StrCat(root, "/server_0"));
  for (int i = 1; i < servers && !common.empty(); ++i) {
    const std::vector<uint64_t> here = ListCheckpoints(absl::StrCat(root, "/server_", i));
    std::vector<uint64_t> both;
    for (uint64_t n : common) {
      if (std::find(here.begin(), here.end(), n) != here.end()) both.push_back(n);
    }
    common = std::move(both);
  }
  for (uint64_t n : common) {
    std::string why;
    for (int i = 0; i < servers && why.empty(); ++i) {
      absl::StatusOr<ShardCheckpoint> ckpt =
          ReadCheckpoint(absl::StrCat(root, "/server_", i, "/", FileName(n)));
      if (!ckpt.ok()) {
        why = std::string(ckpt.status().message());
      } else if (ckpt->iteration != n || ckpt->server_index != i) {
        why = absl::StrCat("server ", i, "'s file of iteration ", n, " holds server ",
                           ckpt->server_index, "'s iteration ", ckpt->iteration);
      }
    }
    if (why.empty()) return n;
    if (passed_over != nullptr) {
      absl::StrAppend(passed_over, passed_over->empty() ? "" : "; ", "passed over iteration ", n,
                      ": ", why);
    }
  }
  return 0;
}

CheckpointWriter::CheckpointWriter(std::function<void(ShardCheckpoint)> write, size_t max_pending)
    : write_(std::move(write)), max_pending_(std::max<size_t>(1, max_pending)) {
  absl::MutexLock lock(&join_mu_);
  thread_ = std::thread([this] { Loop(); });
}

CheckpointWriter::~CheckpointWriter() { Shutdown(); }

void CheckpointWriter::Submit(ShardCheckpoint checkpoint) {
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](CheckpointWriter* w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(w->mu_) {
          return w->stopping_ || w->queue_.size() < w->max_pending_;
        },
        this));
    if (!stopping_) {
      queue_.push_back(std::move(checkpoint));
      return;
    }
  }
  write_(std::move(checkpoint));
}

void CheckpointWriter::Loop() {
  while (true) {
    ShardCheckpoint next;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](CheckpointWriter* w)
               ABSL_EXCLUSIVE_LOCKS_REQUIRED(w->mu_) { return w->stopping_ || !w->queue_.empty(); },
          this));
      if (queue_.empty()) return;  // stopping, and everything is handed on
      next = std::move(queue_.front());
      queue_.pop_front();
    }
    write_(std::move(next));
  }
}

void CheckpointWriter::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  absl::MutexLock lock(&join_mu_);
  if (thread_.joinable()) thread_.join();
}

}  // namespace p3
