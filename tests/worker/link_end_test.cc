// LinkEnd (worker/link_end.h): how a transport's link ends, and what its listener hears.
#include "worker/link_end.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace p3 {
namespace {

// Records what it is told, as "failure <status>" / "abort <status>".
class Recorder : public TransportListener {
 public:
  void OnBuffers(int, uint64_t, absl::string_view) override {}
  void OnFailure(int server, const absl::Status& status) override {
    heard.push_back(absl::StrCat("failure ", server, " ", status.ToString()));
  }
  void OnAbort(int server, const absl::Status& status) override {
    heard.push_back(absl::StrCat("abort ", server, " ", status.ToString()));
  }
  std::vector<std::string> heard;
};

CATCH_TEST_CASE("a link the server closes after the worker's Close ends OK, unreported") {
  Recorder listener;
  LinkEnd end(2, "host:7", "stream", &listener);
  end.Closing();
  end.Ended(absl::OkStatus(), absl::OkStatus(), absl::OkStatus());
  CATCH_CHECK(end.Await(absl::InfiniteFuture()).ok());
  CATCH_CHECK(listener.heard.empty());
}

CATCH_TEST_CASE("a link the server closes before the worker is done is a failure") {
  Recorder listener;
  LinkEnd end(2, "host:7", "stream", &listener);
  end.Ended(absl::OkStatus(), absl::OkStatus(), absl::OkStatus());
  const absl::Status want =
      absl::UnavailableError("server 2 ended the stream before the worker was done");
  CATCH_CHECK(end.Await(absl::InfiniteFuture()) == want);
  CATCH_CHECK(listener.heard == std::vector<std::string>{"failure 2 " + want.ToString()});
}

CATCH_TEST_CASE("a server's Abort is reported as one, ahead of the link's own failure") {
  Recorder listener;
  LinkEnd end(1, "host:7", "link", &listener);
  end.Closing();
  const absl::Status abort = absl::UnavailableError("server 1 aborted the run: worker 0 left");
  end.Ended(abort, absl::InternalError("refused"), end.Named(absl::CancelledError("gone")));
  CATCH_CHECK(end.Await(absl::InfiniteFuture()) == abort);
  CATCH_CHECK(listener.heard == std::vector<std::string>{"abort 1 " + abort.ToString()});
}

CATCH_TEST_CASE("the link's own failure comes before how the transport saw it end") {
  Recorder listener;
  LinkEnd end(1, "host:7", "link", &listener);
  end.Ended(absl::OkStatus(), absl::InternalError("refused"),
            end.Named(absl::CancelledError("gone")));
  CATCH_CHECK(end.Await(absl::InfiniteFuture()) == absl::InternalError("refused"));
  // Without either, the transport's status, named.
  Recorder other;
  LinkEnd broken(3, "10.0.0.1:7070", "stream", &other);
  broken.Ended(absl::OkStatus(), absl::OkStatus(),
               broken.Named(absl::UnavailableError("Socket closed")));
  CATCH_CHECK(broken.Await(absl::InfiniteFuture()) ==
              absl::UnavailableError("server 3 (10.0.0.1:7070): Socket closed"));
  CATCH_CHECK(other.heard.size() == 1);
}

CATCH_TEST_CASE("a Close that the server does not answer in time says so") {
  Recorder listener;
  LinkEnd end(4, "host:7", "stream", &listener);
  end.Closing();
  const absl::Status s = end.Await(absl::Now());
  CATCH_CHECK(s == absl::DeadlineExceededError("server 4 did not close the stream in time"));
  CATCH_CHECK(listener.heard.empty());
}

}  // namespace
}  // namespace p3
