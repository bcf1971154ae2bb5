// Writes the seed corpus of every fuzz target into tests/fuzz/corpus/<target>/: a few
// small valid inputs and near misses each, built with the project's own writers so they
// stay valid as the formats change. Run by hand after a format change:
//   build-fuzz/bin/fuzz_make_corpus tests/fuzz/corpus
#include "sha256.h"
#include "study_plan.h"
#include "study_state.h"
#include "worker_channel.h"

#include "scalelab/v1/agent.pb.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <QJsonArray>
#include <QJsonDocument>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using namespace scalelab;
namespace fs = std::filesystem;

namespace {

fs::path g_root;

void seed(const std::string &target, const std::string &name, const std::string &bytes)
{
    const fs::path dir = g_root / target;
    fs::create_directories(dir);
    std::ofstream(dir / name, std::ios::binary) << bytes;
}

// Inputs for targets that read them with FuzzedDataProvider: strings come from the front
// (ConsumeRandomLengthString: "\\" escapes a backslash, "\\" + another byte ends one),
// integers from the back, the first consumed last.
class ProviderInput {
public:
    ProviderInput &string(const std::string &s)
    {
        for (char c : s)
            m_front += c == '\\' ? std::string("\\\\") : std::string(1, c);
        m_front += "\\|";
        return *this;
    }
    ProviderInput &byte(std::uint8_t b) // an integer whose range fits one byte, minus its minimum
    {
        m_back.insert(m_back.begin(), char(b));
        return *this;
    }
    std::string bytes(const std::string &rest = {}) const { return m_front + rest + m_back; }

private:
    std::string m_front, m_back;
};

std::string sha256Of(const std::string &bytes)
{
    common::Sha256 sha;
    sha.update(bytes.data(), bytes.size());
    return sha.hexDigest();
}

void planSeeds()
{
    const QByteArray example = core::planToJson(core::examplePlan(QStringLiteral("synthetic")));
    seed("fuzz_plan_json", "example.json", example.toStdString());
    seed("fuzz_plan_json", "readme.json", R"({ "name": "cifar10-scaleup", "dataset": "cifar-10",
  "training": { "learningRate": "auto", "maxTrainImages": 10000 },
  "baseline": { "batchSize": 64 },
  "grid": { "workers": [2, 4], "batchSize": [64], "epochs": [3], "gpusPerWorker": [0],
            "threadsPerWorker": [1], "precision": ["fp32"], "lrRule": ["none", "linear"] },
  "repeats": 2, "maxFailures": 2, "targetAccuracy": 0.5, "placement": "pack" })");
    seed("fuzz_plan_json", "overrides.json",
        R"({"name":"o","dataset":"d","grid":{"workers":[2],"gpusPerWorker":[0.5]},
 "overrides":[{"match":"w2-b64","maxFailures":0}],"baseline":{"skip":true},"training":{"warmupEpochs":1,"momentum":0}})");
    seed("fuzz_plan_json", "unknown-field.json", R"({"name":"x","dataset":"d","grid":{"wrokers":[2]}})");
    seed("fuzz_plan_json", "wrong-types.json",
        R"({"name":1,"dataset":"d","grid":{"workers":"2","epochs":[0,0]},"repeats":-1})");
    seed("fuzz_plan_json", "numbers-as-strings.json",
        R"({"name":"n","dataset":"d","training":{"learningRate":"1e-7","labelSmoothing":"NaN"}})");
    seed("fuzz_plan_json", "truncated.json", example.left(example.size() / 2).toStdString());
}

void cifarSeeds()
{
    // Record mode: flags, limit, then per file a count and that many (label, pixels) heads.
    const auto dataset
        = [](std::uint8_t flags, std::uint8_t limit, const std::vector<std::vector<std::string>> &files) {
              ProviderInput in;
              in.byte(flags).byte(limit);
              for (const auto &records : files) {
                  in.byte(std::uint8_t(records.size()));
                  for (const auto &head : records)
                      in.string(head);
              }
              return in.bytes();
          };
    const std::vector<std::string> one { std::string("\x03\x10\x20", 3) };
    seed("fuzz_cifar10", "whole.bin", dataset(0, 0, { one, one, one, one, { "\x01", "\x09" }, one }));
    seed("fuzz_cifar10", "nested-synthetic.bin", dataset(3, 2, { one, one, one, one, one, { "\x02" } }));
    seed("fuzz_cifar10", "bad-label.bin", dataset(0, 0, { one, { "\x0a" }, one, one, one, one }));
    seed("fuzz_cifar10", "missing-file.bin", dataset(0, 0, { one, one, {}, one, one, one }));
    // Raw mode: each file taken as given (a torn file, an empty one).
    ProviderInput raw;
    raw.byte(4).byte(0);
    for (int f = 0; f < 6; ++f)
        raw.string(f == 2 ? std::string(100, '\x01') : std::string());
    seed("fuzz_cifar10", "raw-torn.bin", raw.bytes());
}

std::string eventLog(const std::vector<v1::RunEvent> &events)
{
    std::string bytes;
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    for (const auto &e : events) {
        coded.WriteVarint32(static_cast<std::uint32_t>(e.ByteSizeLong()));
        e.SerializeWithCachedSizes(&coded);
    }
    coded.Trim();
    return bytes;
}

void eventLogSeeds()
{
    std::vector<v1::RunEvent> events(5);
    for (std::size_t i = 0; i < events.size(); ++i) {
        events[i].set_seq(std::int64_t(i) + 1);
        events[i].set_run_id("st-1-r01");
        events[i].set_attempt(1);
        events[i].set_unix_ms(1'700'000'000'000 + std::int64_t(i));
    }
    events[0].mutable_state()->set_state(v1::RUNNING);
    events[1].mutable_started()->set_steps_per_epoch(10);
    events[2].mutable_step()->set_loss(2.3);
    events[3].mutable_epoch()->set_test_accuracy(0.4);
    events[4].mutable_summary();
    const std::string log = eventLog(events);
    seed("fuzz_run_event_log", "whole.log", log);
    seed("fuzz_run_event_log", "torn-tail.log", log.substr(0, log.size() - 3));
    auto gap = events;
    gap[3].set_seq(7);
    seed("fuzz_run_event_log", "seq-gap.log", eventLog(gap));
    seed("fuzz_run_event_log", "garbage-tail.log", log + std::string("\x7f\xff\xff\xff\x0f junk", 10));
    seed("fuzz_run_event_log", "empty.log", "");
}

void manifestSeeds()
{
    const std::string model = "model weights", state = "optimizer state";
    const auto folder
        = [](std::uint8_t flags, const std::string &digits, int epoch, const std::string &manifest,
              const std::string &modelBytes, const std::string &stateBytes) {
              return ProviderInput()
                  .byte(flags)
                  .string(digits)
                  .byte(std::uint8_t(epoch + 1))
                  .string(manifest)
                  .string(modelBytes)
                  .bytes(stateBytes);
          };
    const std::string good = sha256Of(model) + "  model.pt\n" + sha256Of(state) + "  state.pt\n";
    seed("fuzz_checkpoint_manifest", "committed.bin", folder(0, "0003", 0, good, model, state));
    seed("fuzz_checkpoint_manifest", "asked-epoch.bin", folder(0, "0003", 3, good, model, state));
    seed("fuzz_checkpoint_manifest", "sums-by-flag.bin", folder(3, "0001", 0, "", model, state));
    seed("fuzz_checkpoint_manifest", "wrong-sum.bin", folder(0, "0002", 0, good, model + "!", state));
    seed("fuzz_checkpoint_manifest", "bad-line.bin",
        folder(0, "0002", 0, "xyz  ../etc/passwd\n", model, state));
    seed("fuzz_checkpoint_manifest", "no-files.bin", folder(0, "0002", 0, "\n\n", model, state));
}

// The journal rows of releases before the typed events: JSON, as they wrote them.
QJsonObject legacyStudyCreated(const v1::StudyPlan &plan, const QList<core::PlannedRun> &runs)
{
    QJsonArray runArray;
    for (const auto &r : runs)
        runArray.append(QJsonObject { { "runId", r.runId }, { "repeat", r.repeat },
            { "maxFailures", r.maxFailures }, { "config", core::configToJson(r.config) } });
    return QJsonObject { { "name", "example" }, { "plan", QString::fromUtf8(core::planToJson(plan)) },
        { "agents", QJsonArray { "a:1" } }, { "runs", runArray } };
}

QJsonObject legacyAttemptStarting(const QString &runId, int attempt)
{
    return QJsonObject { { "runId", runId }, { "attempt", attempt },
        { "portions", QJsonArray { QJsonObject { { "agent", "a:1" }, { "ranks", QJsonArray { 0 } } } } } };
}

void journalSeeds()
{
    v1::StudyPlan plan = core::examplePlan(QStringLiteral("synthetic"));
    const auto runs = core::expandPlan(plan, QStringLiteral("st-fuzz"));
    const QString r1 = runs.value(0).runId, r2 = runs.value(1).runId;
    std::string lines;
    std::int64_t ms = 1'700'000'000'000;
    const auto line = [&](const char *type, const QJsonObject &payload) {
        lines += std::string(type) + "\t" + std::to_string(ms += 1000) + "\t"
            + QJsonDocument(payload).toJson(QJsonDocument::Compact).toStdString() + "\n";
    };
    line("study_created", legacyStudyCreated(plan, runs));
    line("nodes_seen",
        { { "nodes",
            QJsonArray { QJsonObject { { "agent", "a:1" }, { "cpuCores", 4 }, { "memoryBytes", 8e9 },
                { "software", QJsonObject { { "torch", "2.1" } } } } } } });
    line("attempt_starting", legacyAttemptStarting(r1, 1));
    line("attempt_running", { { "runId", r1 }, { "attempt", 1 }, { "rendezvous", "127.0.0.1:29500" } });
    line("run_stalled", { { "runId", r1 }, { "attempt", 1 }, { "since", 1.7e12 }, { "detail", "rank 1" } });
    line("run_unstalled", { { "runId", r1 }, { "attempt", 1 }, { "seconds", 20 } });
    line("checkpoint_copied",
        { { "runId", r1 }, { "attempt", 1 }, { "epoch", 1 }, { "agent", "a:1" }, { "dir", "/x" } });
    line("attempt_ended",
        { { "runId", r1 }, { "attempt", 1 }, { "outcome", "FAILED" }, { "reason", "killed" },
            { "retry", true }, { "counts", false }, { "unreachable", QJsonArray { "a:1" } },
            { "unreachableSince", 1.7e12 }, { "notBefore", 1.7e12 } });
    line("run_pending", { { "runId", r1 }, { "reason", "waiting for capacity" } });
    line("attempt_starting", legacyAttemptStarting(r1, 2));
    line("checkpoint_uploaded",
        { { "runId", r1 }, { "attempt", 2 }, { "epoch", 1 }, { "agent", "a:1" }, { "from", "b:2" } });
    line(
        "attempt_ended", { { "runId", r1 }, { "attempt", 2 }, { "outcome", "SUCCEEDED" }, { "reason", "" } });
    const std::string head = lines;
    line("cancel_requested", { { "runId", r2 } });
    line("retry_requested", { { "runId", r2 } });
    line("lr_found",
        { { "learningRate", 0.05 }, { "batch", 64 }, { "agent", "a:1" }, { "steps", 100 },
            { "points", QJsonArray { QJsonArray { 1e-5, 2.3 }, QJsonArray { 0.1, 1.9 } } } });
    line("lr_find_failed", { { "reason", "no data" }, { "final", true } });
    line("study_ended", { { "state", "SUCCEEDED" } });
    seed("fuzz_journal_replay", "whole-study.tsv", lines);
    seed("fuzz_journal_replay", "cut-mid-study.tsv", head.substr(0, head.size() / 2));
    seed("fuzz_journal_replay", "events-without-study.tsv", lines.substr(lines.find('\n') + 1));
}

std::string rpc(int index, const google::protobuf::MessageLite &request)
{
    return std::string(1, char(index)) + request.SerializeAsString();
}

void agentSeeds()
{
    v1::RunSpec spec;
    spec.set_dataset("tiny");
    spec.set_batch_size(32);
    spec.set_epochs(2);
    spec.set_learning_rate(0.05);
    spec.set_gpus_per_worker(0.5);
    v1::DescribeRequest describe;
    seed("fuzz_agent_requests", "describe.bin", rpc(0, describe));
    v1::StartWorkersRequest start;
    start.set_run_id("st-1-r01");
    start.set_attempt(1);
    start.set_world_size(2);
    start.add_ranks(0);
    start.add_ranks(1);
    *start.mutable_spec() = spec;
    seed("fuzz_agent_requests", "start-workers.bin", rpc(1, start));
    start.mutable_rendezvous()->set_host("-oProxyCommand");
    start.mutable_rendezvous()->set_port(1);
    start.mutable_spec()->set_gpus_per_worker(0);
    seed("fuzz_agent_requests", "start-workers-bad-host.bin", rpc(1, start));
    v1::WatchRunRequest watch;
    watch.set_run_id("st-1-r01");
    seed("fuzz_agent_requests", "watch-run.bin", rpc(2, watch));
    v1::StopRunRequest stop;
    stop.set_run_id("../x");
    stop.set_grace_ms(100);
    seed("fuzz_agent_requests", "stop-run.bin", rpc(3, stop));
    seed("fuzz_agent_requests", "list-runs.bin", rpc(4, v1::ListRunsRequest()));
    v1::CreateSyntheticDatasetRequest create;
    create.set_name("synthetic-1");
    create.set_train_images(10);
    create.set_test_images(5);
    create.set_kind("shapes");
    seed("fuzz_agent_requests", "create-synthetic.bin", rpc(5, create));
    v1::WatchNodeRequest node;
    node.set_interval_ms(50);
    seed("fuzz_agent_requests", "watch-node.bin", rpc(6, node));
    v1::FetchDatasetRequest fetch;
    fetch.set_name("cifar-10");
    seed("fuzz_agent_requests", "fetch-dataset.bin", rpc(7, fetch));
    v1::ReadCheckpointRequest read;
    read.set_run_id("st-1-r01");
    read.set_epoch(2);
    seed("fuzz_agent_requests", "read-checkpoint.bin", rpc(8, read));
    // WriteCheckpoint: chunks, each a 2-byte little-endian length and the message.
    const std::string data = "weights";
    v1::CheckpointChunk first, second;
    auto *manifest = first.mutable_manifest();
    manifest->set_run_id("st-1-r01");
    manifest->set_epoch(1);
    auto *file = manifest->add_files();
    file->set_name("model.pt");
    file->set_size(std::int64_t(data.size()));
    file->set_sha256(sha256Of(data));
    second.set_file("model.pt");
    second.set_data(data);
    std::string chunks(1, char(9));
    for (const auto *chunk : { &first, &second }) {
        const std::string bytes = chunk->SerializeAsString();
        chunks += char(bytes.size() & 0xff);
        chunks += char(bytes.size() >> 8);
        chunks += bytes;
    }
    seed("fuzz_agent_requests", "write-checkpoint.bin", chunks);
    v1::FindLearningRateRequest lr;
    *lr.mutable_spec() = spec;
    lr.mutable_spec()->set_gpus_per_worker(0);
    lr.set_min_lr(1e-4);
    lr.set_max_lr(1);
    lr.set_steps(50);
    seed("fuzz_agent_requests", "find-learning-rate.bin", rpc(10, lr));
}

} // namespace

// fuzz_worker_channel: byte 0 even = an event line, odd = a command line split at NULs.
void workerChannelSeeds()
{
    const auto event = [](const std::string &name, const v1::WorkerEvent &e) {
        std::string line = worker::eventLine(e);
        line.pop_back(); // the agent splits at newlines: a line arrives without one
        seed("fuzz_worker_channel", name, std::string(1, '\0') + line);
    };
    v1::WorkerEvent e;
    auto *started = e.mutable_started();
    started->mutable_dataset()->set_synthetic(true);
    started->mutable_dataset()->set_train_images(256);
    started->set_steps_per_epoch(4);
    started->add_normalize_mean(0.49);
    started->mutable_effective()->set_learning_rate(0.02);
    (*started->mutable_software())["torch"] = "1.13.1";
    event("event-started", e);
    e.Clear();
    e.mutable_step()->set_step(3);
    e.mutable_step()->set_loss(std::nan(""));
    event("event-step-nan", e);
    e.Clear();
    e.mutable_epoch()->set_test_accuracy(0.41);
    e.mutable_epoch()->set_test_images(10000);
    event("event-epoch", e);
    e.Clear();
    e.mutable_error()->set_message("no space left on device: checkpoint needs 39 MB");
    e.mutable_error()->set_bytes_needed(39000000);
    event("event-error", e);
    e.Clear();
    e.mutable_bench()->set_median_forward_seconds(0.01);
    event("event-bench", e);
    seed("fuzz_worker_channel", "event-unknown-field", std::string(1, '\0') + R"({"step":{"lr":1}})");

    const auto launch = [](const std::string &name, const v1::WorkerLaunch &l) {
        std::string bytes(1, '\1');
        const auto arguments = worker::launchArguments(l);
        for (std::size_t i = 0; i < arguments.size(); ++i)
            bytes += (i ? std::string(1, '\0') : std::string()) + arguments[i];
        seed("fuzz_worker_channel", name, bytes);
    };
    v1::WorkerLaunch l;
    l.set_command("train");
    l.set_data_dir("/data/set");
    l.set_batch_size(64);
    l.set_lr(1e-7);
    l.add_normalize_mean(0.49);
    l.add_normalize_mean(0.48);
    l.add_normalize_mean(0.45);
    l.set_augment(false);
    l.set_seed(18446744073709551615ull);
    l.set_max_train_images(5000000000);
    launch("launch-train", l);
    l.Clear();
    l.set_command("bench");
    l.set_steps(20);
    l.set_channels_last(true);
    launch("launch-bench", l);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s CORPUS_FOLDER (tests/fuzz/corpus)\n", argv[0]);
        return 2;
    }
    g_root = argv[1];
    planSeeds();
    cifarSeeds();
    eventLogSeeds();
    manifestSeeds();
    journalSeeds();
    agentSeeds();
    workerChannelSeeds();
    std::printf("seeds written under %s\n", g_root.c_str());
    return 0;
}
