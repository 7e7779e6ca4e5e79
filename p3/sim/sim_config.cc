#include "p3/sim/sim_config.h"

#include <algorithm>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "p3/base/json_file.h"
#include "p3/base/status_macros.h"
#include "p3/core/wire_dtype.h"
#include "proto/config.h"

namespace p3::sim {

absl::Status CheckSimulatable(const config::ExperimentConfig& config) {
  if (config.mode() == "pipeline") {
    return absl::InvalidArgumentError(
        "mode \"pipeline\" cannot be simulated: it is a pipeline of stages "
        "(tools/pipeline_train, docs/pipeline.md), not a cluster of workers and parameter "
        "servers; p3_sim predicts the cluster modes (p3, baseline, ..., local) and ring "
        "all-reduce");
  }
  return ParseMode(config.mode()).status();
}

absl::Status ApplyConfig(const config::ExperimentConfig& config, SimOptions* options) {
  if (config.mode() == "pipeline") return CheckSimulatable(config);
  absl::StatusOr<Mode> mode = ParseMode(config.mode());
  if (!mode.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("mode \"", config.mode(),
                                                   "\" cannot be simulated: ",
                                                   mode.status().message()));
  }
  options->mode = *mode;
  options->workers = config.cluster().workers();
  options->servers = config.cluster().servers();
  options->colocated = config.network().placement() != "separate";
  options->machines = config.network().machines();
  options->shared_memory = config.scheduling().shared_memory();
  options->bandwidth_gbps = config.network().bandwidth_gbps();
  // Automatic values (0, -1) that nobody resolved: the defaults, as a process would.
  // tools/launcher/tuning.h searches them with p3/sim/tune.h.
  options->slice_params = config::EffectiveSliceParams(config);
  options->pack_params = config::EffectivePackParams(config);
  options->split_threshold = config.scheduling().split_threshold();
  options->max_message_params = config.scheduling().max_message_params();
  options->credit_bytes = config::EffectiveCreditBytes(config);
  absl::StatusOr<WireDType> wire = ParseWireDType(config.scheduling().wire_dtype());
  if (!wire.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("scheduling.wire_dtype: ", wire.status().message()));
  }
  options->wire_dtype = *wire;
  const int64_t batch = config.training().batch_size();
  if (batch > 0 && options->profile.batch > 0 && batch != options->profile.batch) {
    const double scale = static_cast<double>(batch) / static_cast<double>(options->profile.batch);
    for (ProfileBlock& b : options->profile.blocks) {
      b.forward_s *= scale;
      b.backward_s *= scale;
    }
    options->profile.source += absl::StrCat("; times scaled linearly from batch ",
                                            options->profile.batch, " to ", batch);
    options->profile.batch = batch;
  }
  if (config.model().output_pieces() > 1) {
    absl::StatusOr<Profile> cut = CutOutputBlock(options->profile, config.model().output_pieces());
    if (!cut.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("model.output_pieces: ", cut.status().message()));
    }
    options->profile = *std::move(cut);
    options->profile.source += absl::StrCat("; the last block cut into ",
                                            config.model().output_pieces(),
                                            " pieces by rows (p3/sim/profile.h, CutOutputBlock)");
  }
  return absl::OkStatus();
}

namespace {

// "ring_link_share" and "ring_link_share_beside_compute": {"<Gbit/s>": share, ...},
// rates > 0, shares in (0, 1].
absl::Status ParseRingLinkShare(const std::string& path, const std::string& key,
                                const nlohmann::json& value,
                                std::vector<std::pair<double, double>>* out) {
  const std::string bad = absl::StrCat(
      path, ": ", key, " must be an object of link rates (Gbit/s, > 0) to shares in "
      "(0, 1], e.g. {\"1\": 0.93, \"5\": 0.84}");
  if (!value.is_object() || value.empty()) return absl::InvalidArgumentError(bad);
  out->clear();
  for (const auto& [rate_text, share] : value.items()) {
    double rate = 0;
    if (!absl::SimpleAtod(rate_text, &rate) || !(rate > 0) || !share.is_number() ||
        !(share.get<double>() > 0) || share.get<double>() > 1) {
      return absl::InvalidArgumentError(bad);
    }
    out->emplace_back(rate, share.get<double>());
  }
  std::sort(out->begin(), out->end());
  return absl::OkStatus();
}

}  // namespace

absl::Status LoadCalibration(const std::string& path, Calibration* c) {
  P3_ASSIGN_OR_RETURN(const nlohmann::json j, ReadJsonFile(path));
  if (!j.is_object()) return absl::InvalidArgumentError(absl::StrCat(path, ": not a JSON object"));
  std::map<std::string, std::function<void(double)>> fields = {
      {"send_s_per_byte", [c](double v) { c->send_s_per_byte = v; }},
      {"recv_s_per_byte", [c](double v) { c->recv_s_per_byte = v; }},
      {"shaped_s_per_byte_at_1g", [c](double v) { c->shaped_s_per_byte_at_1g = v; }},
      {"shaped_exponent", [c](double v) { c->shaped_exponent = v; }},
      {"per_message_s", [c](double v) { c->per_message_s = v; }},
      {"write_gap_s", [c](double v) { c->write_gap_s = v; }},
      {"shm_s_per_byte", [c](double v) { c->shm_s_per_byte = v; }},
      {"update_s_per_byte", [c](double v) { c->update_s_per_byte = v; }},
      {"worker_update_s_per_byte", [c](double v) { c->worker_update_s_per_byte = v; }},
      {"header_bytes", [c](double v) { c->header_bytes = static_cast<int64_t>(v); }},
      {"goodput_factor", [c](double v) { c->goodput_factor = v; }},
      {"kernel_buffer_bytes", [c](double v) { c->kernel_buffer_bytes = static_cast<int64_t>(v); }},
      {"loopback_gbps", [c](double v) { c->loopback_gbps = v; }},
      {"latency_s", [c](double v) { c->latency_s = v; }},
      {"compute_scale", [c](double v) { c->compute_scale = v; }},
      {"shared_host_compute_speed", [c](double v) { c->shared_host_compute_speed = v; }},
      {"preempt_s", [c](double v) { c->preempt_s = v; }},
      {"shaped_bytes_per_wake", [c](double v) { c->shaped_bytes_per_wake = v; }},
      {"shaped_stream_s_per_byte", [c](double v) { c->shaped_stream_s_per_byte = v; }},
      {"shaped_stream_wakes_per_byte", [c](double v) { c->shaped_stream_wakes_per_byte = v; }},
      {"shaped_stream_turns_s_per_byte", [c](double v) { c->shaped_stream_turns_s_per_byte = v; }},
      {"shaped_stream_turns_wakes_per_byte",
       [c](double v) { c->shaped_stream_turns_wakes_per_byte = v; }},
      {"comm_interference", [c](double v) { c->comm_interference = v; }},
      {"bf16_encode_s_per_value", [c](double v) { c->bf16_encode_s_per_value = v; }},
      {"bf16_decode_s_per_value", [c](double v) { c->bf16_decode_s_per_value = v; }},
      {"f16_encode_s_per_value", [c](double v) { c->f16_encode_s_per_value = v; }},
      {"f16_decode_s_per_value", [c](double v) { c->f16_decode_s_per_value = v; }},
      {"ring_send_s_per_byte", [c](double v) { c->ring_send_s_per_byte = v; }},
      {"ring_recv_s_per_byte", [c](double v) { c->ring_recv_s_per_byte = v; }},
      {"ring_reduce_s_per_byte", [c](double v) { c->ring_reduce_s_per_byte = v; }},
      {"pcie_bytes_per_s", [c](double v) { c->pcie_bytes_per_s = v; }},
  };
  for (const auto& [key, value] : j.items()) {
    if (key.rfind("_", 0) == 0) continue;  // "_comment", "_source": documentation
    if (key == "ring_link_share" || key == "ring_link_share_beside_compute") {
      P3_RETURN_IF_ERROR(ParseRingLinkShare(
          path, key, value,
          key == "ring_link_share" ? &c->ring_link_share : &c->ring_link_share_beside_compute));
      continue;
    }
    auto it = fields.find(key);
    if (it == fields.end()) {
      std::string allowed;
      for (const auto& [name, set] : fields) allowed += (allowed.empty() ? "" : ", ") + name;
      allowed += ", ring_link_share, ring_link_share_beside_compute";
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": unknown field \"", key, "\"; allowed: ", allowed));
    }
    if (!value.is_number() || value.get<double>() < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": ", key, " must be a number >= 0"));
    }
    it->second(value.get<double>());
  }
  return absl::OkStatus();
}

std::string ResultJson(const SimOptions& o, const SimResult& r) {
  nlohmann::json j;
  j["samples_per_second"] = r.samples_per_second;
  j["iteration_seconds"] = r.iteration_seconds;
  nlohmann::json workers = nlohmann::json::array();
  for (const WorkerBreakdown& w : r.workers) {
    workers.push_back({{"iteration_s", w.iteration_s},
                       {"compute_s", w.compute_s},
                       {"exposed_comm_s", w.exposed_comm_s},
                       {"idle_s", w.idle_s}});
  }
  j["workers"] = workers;
  j["cpu_s_per_iteration"] = {{"compute", r.cpu.compute_s},
                              {"send", r.cpu.send_s},
                              {"receive", r.cpu.recv_s},
                              {"update", r.cpu.update_s},
                              {"ring", r.cpu.ring_s},
                              {"preempt", r.cpu.preempt_s},
                              {"interference", r.cpu.interference_s},
                              {"total", r.cpu.total_s()}};
  j["mode"] = o.allreduce ? std::string("allreduce") : ModeName(o.mode);
  j["model"] = o.profile.model;
  j["profile_source"] = o.profile.source;
  j["batch_per_worker"] = o.profile.batch;
  j["workers_count"] = o.workers;
  j["servers_count"] = o.servers;
  j["placement"] = o.colocated ? "colocated" : "separate";
  j["machines"] = o.machines;
  j["shared_memory"] = o.shared_memory;
  j["bandwidth_gbps"] = o.bandwidth_gbps;
  j["slice_params"] = o.slice_params;
  j["pack_params"] = o.pack_params;
  j["credit_bytes"] = o.credit_bytes;
  j["wire_dtype"] = WireDTypeName(o.wire_dtype);
  j["cpu_cores_per_host"] = o.cpu_cores_per_host;
  j["machines_per_host"] = o.machines_per_host;
  j["iterations"] = o.iterations;
  j["sharing"] = o.equal_split ? "equal_split" : "water_filling";
  j["warmup_iterations"] = o.warmup_iterations;
  j["num_slices"] = r.num_slices;
  j["messages"] = r.num_messages;
  j["events"] = r.events;
  j["simulated_seconds"] = r.simulated_seconds;
  const Calibration& c = o.calibration;
  j["calibration"] = {{"send_s_per_byte", c.send_s_per_byte},
                      {"recv_s_per_byte", c.recv_s_per_byte},
                      {"shaped_s_per_byte_at_1g", c.shaped_s_per_byte_at_1g},
                      {"shaped_exponent", c.shaped_exponent},
                      {"per_message_s", c.per_message_s},
                      {"write_gap_s", c.write_gap_s},
                      {"shm_s_per_byte", c.shm_s_per_byte},
                      {"update_s_per_byte", c.update_s_per_byte},
                      {"worker_update_s_per_byte", c.worker_update_s_per_byte},
                      {"header_bytes", c.header_bytes},
                      {"goodput_factor", c.goodput_factor},
                      {"kernel_buffer_bytes", c.kernel_buffer_bytes},
                      {"loopback_gbps", c.loopback_gbps},
                      {"latency_s", c.latency_s},
                      {"compute_scale", c.compute_scale},
                      {"shared_host_compute_speed", c.shared_host_compute_speed},
                      {"preempt_s", c.preempt_s},
                      {"shaped_bytes_per_wake", c.shaped_bytes_per_wake},
                      {"shaped_stream_s_per_byte", c.shaped_stream_s_per_byte},
                      {"shaped_stream_wakes_per_byte", c.shaped_stream_wakes_per_byte},
                      {"shaped_stream_turns_s_per_byte", c.shaped_stream_turns_s_per_byte},
                      {"shaped_stream_turns_wakes_per_byte", c.shaped_stream_turns_wakes_per_byte},
                      {"comm_interference", c.comm_interference},
                      {"bf16_encode_s_per_value", c.bf16_encode_s_per_value},
                      {"bf16_decode_s_per_value", c.bf16_decode_s_per_value},
                      {"f16_encode_s_per_value", c.f16_encode_s_per_value},
                      {"f16_decode_s_per_value", c.f16_decode_s_per_value},
                      {"ring_send_s_per_byte", c.ring_send_s_per_byte},
                      {"ring_recv_s_per_byte", c.ring_recv_s_per_byte},
                      {"ring_reduce_s_per_byte", c.ring_reduce_s_per_byte},
                      {"pcie_bytes_per_s", c.pcie_bytes_per_s}};
  for (const auto& [key, table] :
       {std::make_pair("ring_link_share", &c.ring_link_share),
        std::make_pair("ring_link_share_beside_compute", &c.ring_link_share_beside_compute)}) {
    if (table->empty()) continue;
    nlohmann::json shares = nlohmann::json::object();
    for (const auto& [rate, share] : *table) shares[absl::StrCat(rate)] = share;
    j["calibration"][key] = shares;
  }
  return j.dump(2) + "\n";
}

}  // namespace p3::sim
