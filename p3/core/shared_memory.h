// A worker's flat parameter and gradient buffers in POSIX shared memory, so that a server
// on the same machine reads gradients from and writes updated values into them directly:
// slice values between a colocated worker and server never cross a socket
// (docs/protocol.md, "Colocated worker and server").
//
// The worker creates the region, names it in its Hello together with the random nonce
// written in the region's header, and unlinks the name once the servers have answered;
// the mappings stay valid until both sides unmap. A server opens the name, checks size
// and nonce, and maps it. A region of another run, another machine, or a stale name is
// refused by that check, and the pair falls back to values on the stream.
//
// Layout: a 4 KiB header (magic, nonce, number of floats), then the parameters, then the
// gradients, each starting on a page boundary.
//
// Example:
//   P3_ASSIGN_OR_RETURN(std::unique_ptr<SharedRegion> mine, SharedRegion::Create(n));
//   hello.set_shared_memory_name(mine->name());               // worker
//   hello.set_shared_memory_nonce(mine->nonce());
//   ...
//   absl::StatusOr<std::unique_ptr<SharedRegion>> theirs =    // server
//       SharedRegion::Open(hello.shared_memory_name(), hello.shared_memory_nonce(), n);
//   std::memcpy(theirs.value()->params() + slice.offset, values, bytes);
//
// The region is plain memory: who writes which floats when is the protocol's business
// (a server writes only the slices it owns, version v of a slice only after every
// worker's gradient of iteration v-1 has arrived, so the worker is not reading them).
// Not thread-safe itself; the pointers may be used from any thread.
#ifndef P3_P3_CORE_SHARED_MEMORY_H_
#define P3_P3_CORE_SHARED_MEMORY_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace p3 {

class SharedRegion {
 public:
  // A new region for `num_floats` parameters and as many gradients, zero-filled, under a
  // fresh name (/p3-<pid>-<n>-<random>). Its memory is reserved at once (posix_fallocate),
  // so that a full /dev/shm is an error here (ResourceExhausted, saying how much was
  // needed) instead of a SIGBUS later.
  static absl::StatusOr<std::unique_ptr<SharedRegion>> Create(int64_t num_floats);

  // Maps the region `name` made by Create() in another process (or this one). Refused
  // (NotFound, FailedPrecondition) unless it exists, holds `num_floats` floats and carries
  // `nonce`.
  static absl::StatusOr<std::unique_ptr<SharedRegion>> Open(const std::string& name,
                                                            uint64_t nonce, int64_t num_floats);

  SharedRegion(const SharedRegion&) = delete;
  SharedRegion& operator=(const SharedRegion&) = delete;
  // Unmaps; the creator also unlinks the name if Unlink() was not called.
  ~SharedRegion();

  // Removes the name: nobody can open the region any more; existing mappings stay valid.
  // Safe to call twice.
  void Unlink();

  float* params() const { return params_; }
  float* grads() const { return grads_; }
  int64_t num_floats() const { return num_floats_; }
  const std::string& name() const { return name_; }
  uint64_t nonce() const { return nonce_; }

  // Bytes of a region for `num_floats` floats.
  static size_t SizeFor(int64_t num_floats);

 private:
  SharedRegion(std::string name, uint64_t nonce, int64_t num_floats, void* base, size_t size,
               bool owner);

  const std::string name_;
  const uint64_t nonce_;
  const int64_t num_floats_;
  void* const base_;
  const size_t size_;
  bool linked_;  // the creator has not unlinked the name yet
  float* params_;
  float* grads_;
};

}  // namespace p3

#endif  // P3_P3_CORE_SHARED_MEMORY_H_
