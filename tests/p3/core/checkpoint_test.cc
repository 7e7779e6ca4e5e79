// Checkpoint files (atomic, self-checking) and the server shard's checkpoint/restore.
#include "p3/core/checkpoint.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "p3/core/parameter_shard.h"

namespace p3 {
namespace {

std::string TempDir(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
  std::string cmd = "rm -rf '" + path + "'";
  CATCH_REQUIRE(std::system(cmd.c_str()) == 0);
  return path;
}

ShardCheckpoint Sample(uint64_t iteration) {
  ShardCheckpoint c;
  c.iteration = iteration;
  c.server_index = 1;
  SliceCheckpoint a{3, {1.5f, -2.0f, 3.25f}, {}};
  a.optimizer.buf = {0.1f, 0.2f, 0.3f};
  a.optimizer.steps = 7;
  SliceCheckpoint b{5, {4.0f}, {}};
  b.optimizer.buf = {1.0f};
  b.optimizer.buf_sq = {2.0f};
  b.optimizer.steps = 7;
  c.slices = {a, b};
  return c;
}

CATCH_TEST_CASE("a checkpoint reads back exactly as written") {
  const std::string dir = TempDir("ckpt_roundtrip");
  CATCH_REQUIRE(WriteCheckpoint(Sample(20), dir).ok());
  auto back = ReadLatestCheckpoint(dir, 0);
  CATCH_REQUIRE(back.ok());
  CATCH_CHECK(back->iteration == 20);
  CATCH_CHECK(back->server_index == 1);
  CATCH_REQUIRE(back->slices.size() == 2);
  CATCH_CHECK(back->slices[0].slice_id == 3);
  CATCH_CHECK(back->slices[0].params == std::vector<float>{1.5f, -2.0f, 3.25f});
  CATCH_CHECK(back->slices[0].optimizer.buf == std::vector<float>{0.1f, 0.2f, 0.3f});
  CATCH_CHECK(back->slices[0].optimizer.buf_sq.empty());
  CATCH_CHECK(back->slices[1].optimizer.buf_sq == std::vector<float>{2.0f});
  CATCH_CHECK(back->slices[1].optimizer.steps == 7);
}

CATCH_TEST_CASE(
    "a checkpoint records the plan it was taken under; one without it, as every older file, "
    "reads as the config's plan") {
  const std::string dir = TempDir("ckpt_plan");
  ShardCheckpoint replanned = Sample(20);
  replanned.slice_params = 3;
  replanned.replan_slice_params = 5;
  CATCH_REQUIRE(WriteCheckpoint(replanned, dir).ok());
  auto back = ReadLatestCheckpoint(dir, 20);
  CATCH_REQUIRE(back.ok());
  CATCH_CHECK(back->slice_params == 3);
  CATCH_CHECK(back->replan_slice_params == 5);
  CATCH_CHECK(back->slices[1].optimizer.buf_sq == std::vector<float>{2.0f});
  // Without a re-plan the file is the format before the field (no trailer): what older
  // binaries wrote and read.
  const std::string old_dir = TempDir("ckpt_plan_old");
  CATCH_REQUIRE(WriteCheckpoint(Sample(20), old_dir).ok());
  std::ifstream with(dir + "/ckpt_000000020.bin", std::ios::binary | std::ios::ate);
  std::ifstream without(old_dir + "/ckpt_000000020.bin", std::ios::binary | std::ios::ate);
  CATCH_CHECK(static_cast<int64_t>(with.tellg()) - static_cast<int64_t>(without.tellg()) == 4 + 16);
  back = ReadLatestCheckpoint(old_dir, 20);
  CATCH_REQUIRE(back.ok());
  CATCH_CHECK(back->slice_params == 0);
  CATCH_CHECK(back->replan_slice_params == 0);
}

CATCH_TEST_CASE(
    "an elastic run's checkpoint records its membership, with or without a plan; a file "
    "without it reads as none") {
  for (const int64_t slice_params : {0, 3}) {
    const std::string dir = TempDir(slice_params == 0 ? "ckpt_memb" : "ckpt_memb_plan");
    ShardCheckpoint elastic = Sample(20);
    elastic.slice_params = slice_params;
    elastic.membership = {{0, {0, 1}}, {10, {0, 1, 2}}, {15, {0, 2}}};
    CATCH_REQUIRE(WriteCheckpoint(elastic, dir).ok());
    auto back = ReadLatestCheckpoint(dir, 20);
    CATCH_REQUIRE(back.ok());
    CATCH_CHECK(back->slice_params == slice_params);
    CATCH_REQUIRE(back->membership.size() == 3);
    CATCH_CHECK(back->membership[1].from_iteration == 10);
    CATCH_CHECK(back->membership[1].present == std::vector<int>{0, 1, 2});
    CATCH_CHECK(back->membership[2].present == std::vector<int>{0, 2});
    CATCH_CHECK(back->slices[1].optimizer.buf_sq == std::vector<float>{2.0f});
  }
  const std::string plain = TempDir("ckpt_memb_none");
  CATCH_REQUIRE(WriteCheckpoint(Sample(20), plain).ok());
  auto back = ReadLatestCheckpoint(plain, 20);
  CATCH_REQUIRE(back.ok());
  CATCH_CHECK(back->membership.empty());
}

CATCH_TEST_CASE("a torn or corrupt newest checkpoint is skipped for the previous one") {
  const std::string dir = TempDir("ckpt_corrupt");
  CATCH_REQUIRE(WriteCheckpoint(Sample(10), dir).ok());
  CATCH_REQUIRE(WriteCheckpoint(Sample(20), dir).ok());
  const std::string newest = dir + "/ckpt_000000020.bin";
  {
    std::fstream f(newest, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(40);
    f.put('\x7f');  // one byte of the payload changed
  }
  auto corrupt = ReadCheckpoint(newest);
  CATCH_CHECK(absl::IsDataLoss(corrupt.status()));
  CATCH_CHECK(corrupt.status().message().find("checksum") != std::string::npos);
  auto latest = ReadLatestCheckpoint(dir, 0);
  CATCH_REQUIRE(latest.ok());
  CATCH_CHECK(latest->iteration == 10);
  // Truncation is caught too, and a leftover temporary file is never read.
  CATCH_REQUIRE(truncate(newest.c_str(), 30) == 0);
  CATCH_CHECK(ReadCheckpoint(newest).status().message().find("truncated") != std::string::npos);
  std::ofstream(dir + "/ckpt_000000030.bin.tmp") << "half-written";
  CATCH_CHECK(ReadLatestCheckpoint(dir, 0)->iteration == 10);
  CATCH_CHECK(absl::IsNotFound(ReadLatestCheckpoint(dir, 30).status()));
}

ShardCheckpoint SampleOf(int server, uint64_t iteration) {
  ShardCheckpoint c = Sample(iteration);
  c.server_index = server;
  return c;
}

CATCH_TEST_CASE("the newest common checkpoint is one every server has, valid") {
  const std::string root = TempDir("ckpt_common");
  auto dir = [&](int i) { return root + "/server_" + std::to_string(i); };
  CATCH_CHECK(NewestCommonCheckpoint(root, 2) == 0);  // nothing written yet
  for (uint64_t n : {5, 10, 15}) CATCH_REQUIRE(WriteCheckpoint(SampleOf(0, n), dir(0), 5).ok());
  for (uint64_t n : {5, 10}) CATCH_REQUIRE(WriteCheckpoint(SampleOf(1, n), dir(1), 5).ok());
  // Server 1 has no 15: the newest both have is 10.
  CATCH_CHECK(NewestCommonCheckpoint(root, 2) == 10);
  CATCH_CHECK(NewestCommonCheckpoint(root, 1) == 15);
  CATCH_CHECK(NewestCommonCheckpoint(root, 3) == 0);  // server 2 has none
  // Server 0's 10 corrupt: passed over for 5, saying why.
  {
    std::fstream f(dir(0) + "/ckpt_000000010.bin", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(40);
    f.put('\x7f');
  }
  std::string passed_over;
  CATCH_CHECK(NewestCommonCheckpoint(root, 2, &passed_over) == 5);
  CATCH_CHECK(passed_over.find("iteration 10") != std::string::npos);
  CATCH_CHECK(passed_over.find("checksum") != std::string::npos);
  // A file under another server's folder (copied by hand) is not that server's.
  CATCH_REQUIRE(WriteCheckpoint(SampleOf(0, 20), dir(0), 5).ok());
  CATCH_REQUIRE(WriteCheckpoint(SampleOf(0, 20), dir(1), 5).ok());
  passed_over.clear();
  CATCH_CHECK(NewestCommonCheckpoint(root, 2, &passed_over) == 5);
  CATCH_CHECK(passed_over.find("holds server 0's") != std::string::npos);
}

CATCH_TEST_CASE("only the newest checkpoints are kept") {
  const std::string dir = TempDir("ckpt_keep");
  for (uint64_t it : {2, 4, 6, 8}) CATCH_REQUIRE(WriteCheckpoint(Sample(it), dir, 2).ok());
  CATCH_CHECK(ReadLatestCheckpoint(dir, 8).ok());
  CATCH_CHECK(ReadLatestCheckpoint(dir, 6).ok());
  CATCH_CHECK(absl::IsNotFound(ReadLatestCheckpoint(dir, 4).status()));
  CATCH_CHECK(absl::IsNotFound(ReadLatestCheckpoint(TempDir("ckpt_none"), 0).status()));
}

ClusterSignature Signature() {
  ClusterSignature sig;
  sig.num_workers = 1;
  sig.tensors = {{"w", {5}, "float32"}};
  sig.plan.slice_params = 3;  // slices [0,3) and [3,5)
  return sig;
}

CATCH_TEST_CASE("the shard hands out a checkpoint once all its slices reach the iteration") {
  std::vector<ShardCheckpoint> saved;
  ShardOptions o;
  o.checkpoint_every = 2;
  o.on_checkpoint = [&](ShardCheckpoint c) { saved.push_back(std::move(c)); };
  ParameterShard shard(o);
  CATCH_REQUIRE(shard.Join(Signature(), 0).ok());
  std::vector<float> w = {1, 2, 3, 4, 5}, g = {1, 1, 1};
  CATCH_REQUIRE(shard.Init(0, 0, w.data(), 3).ok());
  CATCH_REQUIRE(shard.Init(0, 1, w.data() + 3, 2).ok());
  for (uint64_t it = 0; it < 2; ++it) CATCH_REQUIRE(shard.Gradient(0, 0, it, g.data(), 3).ok());
  CATCH_CHECK(saved.empty());  // slice 1 is still at version 0
  for (uint64_t it = 0; it < 2; ++it) CATCH_REQUIRE(shard.Gradient(0, 1, it, g.data(), 2).ok());
  CATCH_REQUIRE(saved.size() == 1);
  CATCH_CHECK(saved[0].iteration == 2);
  CATCH_REQUIRE(saved[0].slices.size() == 2);
  CATCH_CHECK(saved[0].slices[0].params == shard.SliceValues(0)->first);
  CATCH_CHECK(saved[0].slices[1].optimizer.steps == 2);

  // A shard restored from it starts at version 2 with the same values and state.
  ShardOptions r;
  r.restore = saved[0];
  ParameterShard restored(r);
  CATCH_CHECK(restored.start_version() == 2);
  auto joined = restored.Join(Signature(), 0);
  CATCH_REQUIRE(joined.ok());
  CATCH_REQUIRE(joined->size() == 2);  // both slices at once: no initial values needed
  CATCH_CHECK((*joined)[0].message.version == 2);
  CATCH_CHECK(restored.SliceValues(1)->first == shard.SliceValues(1)->first);
  CATCH_CHECK(absl::IsAlreadyExists(restored.Init(0, 0, w.data(), 3).status()));
}

CATCH_TEST_CASE("a checkpoint that does not fit the model is refused at the handshake") {
  ShardOptions r;
  r.restore = Sample(4);
  r.restore->server_index = 0;
  ParameterShard shard(r);
  auto joined = shard.Join(Signature(), 0);
  CATCH_REQUIRE(absl::IsFailedPrecondition(joined.status()));
  CATCH_CHECK(joined.status().message().find("does not fit") != std::string::npos);
}

CATCH_TEST_CASE("the checkpoint writer hands checkpoints on in order off the caller's thread") {
  absl::Mutex mu;
  bool release = false;
  std::vector<uint64_t> written;
  std::vector<std::thread::id> threads;
  CheckpointWriter writer(
      [&](ShardCheckpoint c) {
        absl::MutexLock lock(&mu);
        // The first write waits until the test lets it go: Submit must not wait for it.
        mu.Await(absl::Condition(&release));
        written.push_back(c.iteration);
        threads.push_back(std::this_thread::get_id());
      },
      /*max_pending=*/4);
  writer.Submit(Sample(2));
  writer.Submit(Sample(4));
  writer.Submit(Sample(6));
  {
    absl::MutexLock lock(&mu);
    CATCH_CHECK(written.empty());  // every Submit returned while the writer was blocked
    release = true;
  }
  writer.Shutdown();  // writes what is queued, then joins
  CATCH_CHECK(written == std::vector<uint64_t>{2, 4, 6});
  CATCH_REQUIRE(threads.size() == 3);
  CATCH_CHECK(threads[0] != std::this_thread::get_id());
  writer.Shutdown();  // twice is fine
  // After Shutdown nothing is lost: written on the caller's thread.
  writer.Submit(Sample(8));
  CATCH_CHECK(written.back() == 8);
  CATCH_CHECK(threads.back() == std::this_thread::get_id());
}

CATCH_TEST_CASE("a checkpoint written through the writer reads back equal") {
  const std::string dir = TempDir("ckpt_writer");
  std::vector<absl::Status> statuses;
  {
    CheckpointWriter writer(
        [&](ShardCheckpoint c) { statuses.push_back(WriteCheckpoint(c, dir)); });
    writer.Submit(Sample(10));
  }  // the destructor shuts down
  CATCH_REQUIRE(statuses.size() == 1);
  CATCH_CHECK(statuses[0].ok());
  auto read = ReadLatestCheckpoint(dir, 10);
  CATCH_REQUIRE(read.ok());
  CATCH_CHECK(read->slices[0].params == Sample(10).slices[0].params);
}

}  // namespace
}  // namespace p3
