// How a transport's link to one server ends, the same for every transport
// (worker/transport.h): Close() marks the worker done, queues Done and waits; the reader,
// once nothing more comes, settles the link's final status from what ended it and tells
// the listener once — OnAbort for a server's Abort, OnFailure for anything but a clean
// close.
//
// Example (a transport's reader thread, its link over):
//   end_.Ended(abort, failure, finished.ok() ? finished : end_.Named(finished));
// and its Close():
//   end_.Closing();
//   send_queue_->Push(lane_, Upstream{.kind = Upstream::Kind::kDone}, ...);
//   return end_.Await(deadline);
//
// Thread-safe.
#ifndef P3_WORKER_LINK_END_H_
#define P3_WORKER_LINK_END_H_

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "worker/transport.h"

namespace p3 {

class LinkEnd {
 public:
  // The link to server `server_index` at `address`, a `noun` ("stream") in messages;
  // `listener` (not owned) is told how it ended.
  LinkEnd(int server_index, std::string address, std::string noun, TransportListener* listener);

  // `status` with the server named: "server 1 (10.0.0.2:7070): <message>".
  absl::Status Named(const absl::Status& status) const;

  // The worker is done with the link (Transport::Close): a server that ends it now ends
  // it cleanly.
  void Closing();

  // The link is over, on the reader thread: the server's Abort (`abort`), else the link's
  // own failure (`failure`: a message malformed or refused), else how the transport saw it
  // end (`finished`, OK when the server closed it). A clean end before Closing() is a
  // failure too. Reports to the listener and records the final status. Once.
  void Ended(const absl::Status& abort, const absl::Status& failure, const absl::Status& finished);

  // Waits until Ended() and returns the final status; DeadlineExceeded at `deadline`.
  absl::Status Await(absl::Time deadline);

 private:
  const int server_index_;
  const std::string address_;
  const std::string noun_;
  TransportListener* const listener_;
  absl::Mutex mu_;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status final_status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace p3

#endif  // P3_WORKER_LINK_END_H_
