#include "journal_events.h"

#include <google/protobuf/util/json_util.h>

#include <QJsonDocument>

#include <cmath>
#include <limits>

namespace scalelab::core::journal_events {
namespace {

std::string str(const QString &s)
{
    return s.toStdString();
}

QString qstr(const std::string &s)
{
    return QString::fromStdString(s);
}

// A JSON object (probes, a trial's parameters) as a Struct: both sides are JSON, so the
// conversion cannot fail for an object QJsonDocument wrote.
google::protobuf::Struct toStruct(const QJsonObject &o)
{
    google::protobuf::Struct s;
    (void)google::protobuf::util::JsonStringToMessage(
        QJsonDocument(o).toJson(QJsonDocument::Compact).toStdString(), &s); // JSON by construction
    return s;
}

} // namespace

QJsonObject structToJson(const google::protobuf::Struct &s)
{
    std::string json;
    (void)google::protobuf::util::MessageToJsonString(s, &json); // a Struct always prints
    return QJsonDocument::fromJson(QByteArray::fromStdString(json)).object();
}

v1::RunConfigRecord configRecord(const RunConfig &c)
{
    v1::RunConfigRecord r;
    r.set_baseline(c.baseline);
    r.set_workers(c.workers);
    r.set_batch_size(c.batchSize);
    r.set_epochs(c.epochs);
    r.set_gpus_per_worker(c.gpusPerWorker);
    r.set_threads_per_worker(c.threadsPerWorker);
    r.set_precision(str(c.precision));
    r.set_lr_rule(str(c.lrRule));
    r.set_model(str(c.model));
    r.set_accumulation_steps(c.accumulationSteps);
    r.set_min_workers(c.minWorkers);
    return r;
}

RunConfig configFromRecord(const v1::RunConfigRecord &r)
{
    RunConfig c;
    c.baseline = r.baseline();
    c.workers = r.workers() > 0 ? r.workers() : 1;
    c.batchSize = r.batch_size() > 0 ? r.batch_size() : 64;
    c.epochs = r.epochs() > 0 ? r.epochs() : 1;
    c.gpusPerWorker = r.gpus_per_worker();
    c.threadsPerWorker = r.threads_per_worker();
    c.precision = r.precision().empty() ? QStringLiteral("fp32") : qstr(r.precision());
    c.lrRule = r.lr_rule().empty() ? QStringLiteral("none") : qstr(r.lr_rule());
    // Journals written before models were a run's: every run trained the default.
    c.model = r.has_model() ? qstr(r.model()) : QString::fromLatin1(kDefaultModelName);
    // Journals written before accumulation and elastic runs: neither.
    c.accumulationSteps = std::max(1, r.accumulation_steps());
    c.minWorkers = r.min_workers();
    return c;
}

v1::TrialDecisionRecord decisionRecord(const TrialDecision &d)
{
    v1::TrialDecisionRecord r;
    r.set_run_id(str(d.runId));
    r.set_action(str(d.action));
    r.set_epoch(d.epoch);
    r.set_value(d.value);
    r.set_rung(d.rung);
    for (double v : d.seen)
        r.add_seen(v);
    r.set_next_target(d.nextTarget);
    r.set_reason(str(d.reason));
    r.set_continued(d.continued);
    if (d.cutoff)
        r.set_cutoff(*d.cutoff);
    return r;
}

TrialDecision decisionFromRecord(const v1::TrialDecisionRecord &r)
{
    TrialDecision d;
    d.runId = qstr(r.run_id());
    d.action = qstr(r.action());
    d.epoch = r.epoch();
    d.value = r.value();
    d.rung = r.rung();
    if (r.has_cutoff())
        d.cutoff = r.cutoff();
    for (double v : r.seen())
        d.seen << v;
    d.nextTarget = r.next_target();
    d.reason = qstr(r.reason());
    d.continued = r.continued();
    return d;
}

NodeInfo nodeFromRecord(const v1::NodeRecord &r)
{
    NodeInfo n;
    n.agent = qstr(r.agent());
    n.hostname = qstr(r.hostname());
    n.agentVersion = qstr(r.agent_version());
    n.cpuCores = r.cpu_cores();
    n.memoryBytes = r.memory_bytes();
    for (const auto &g : r.gpus())
        n.gpus << qstr(g);
    n.cpuModel = qstr(r.cpu_model());
    n.os = qstr(r.os());
    n.gpuStatus = qstr(r.gpu_status());
    for (const auto &[component, version] : r.software())
        n.software.insert(qstr(component), qstr(version));
    return n;
}

QString outcomeName(v1::AttemptOutcome outcome)
{
    switch (outcome) {
    case v1::ATTEMPT_SUCCEEDED:
        return QStringLiteral("SUCCEEDED");
    case v1::ATTEMPT_FAILED:
        return QStringLiteral("FAILED");
    case v1::ATTEMPT_CANCELLED:
        return QStringLiteral("CANCELLED");
    case v1::ATTEMPT_RESIZED:
        return QStringLiteral("RESIZED");
    default:
        return QStringLiteral("UNKNOWN");
    }
}

v1::AttemptOutcome outcomeFromName(const QString &name)
{
    v1::AttemptOutcome outcome = v1::ATTEMPT_OUTCOME_UNSPECIFIED;
    return v1::AttemptOutcome_Parse("ATTEMPT_" + str(name), &outcome) ? outcome
                                                                      : v1::ATTEMPT_OUTCOME_UNSPECIFIED;
}

v1::StudyEvent studyCreated(
    const QString &name, const v1::StudyPlan &plan, const QStringList &agents, const QList<PlannedRun> &runs)
{
    v1::StudyEvent e;
    v1::StudyCreated &m = *e.mutable_study_created();
    m.set_name(str(name));
    *m.mutable_plan() = plan;
    for (const QString &a : agents)
        m.add_agents(str(a));
    for (const PlannedRun &run : runs) {
        v1::PlannedRunRecord &r = *m.add_runs();
        r.set_run_id(str(run.runId));
        r.set_repeat(run.repeat);
        r.set_max_failures(run.maxFailures);
        *r.mutable_config() = configRecord(run.config);
        if (run.trial) {
            r.set_trial(true);
            *r.mutable_params() = toStruct(run.params);
            r.set_bracket(run.bracket);
        }
    }
    return e;
}

v1::StudyEvent nodesSeen(const QList<NodeInfo> &nodes)
{
    v1::StudyEvent e;
    for (const NodeInfo &n : nodes) {
        v1::NodeRecord &r = *e.mutable_nodes_seen()->add_nodes();
        r.set_agent(str(n.agent));
        r.set_hostname(str(n.hostname));
        r.set_agent_version(str(n.agentVersion));
        r.set_cpu_cores(n.cpuCores);
        r.set_memory_bytes(n.memoryBytes);
        for (const QString &g : n.gpus)
            r.add_gpus(str(g));
        r.set_cpu_model(str(n.cpuModel));
        r.set_os(str(n.os));
        r.set_gpu_status(str(n.gpuStatus));
        for (auto it = n.software.begin(); it != n.software.end(); ++it)
            (*r.mutable_software())[str(it.key())] = str(it.value());
    }
    return e;
}

v1::StudyEvent runPending(const QString &runId, const QString &reason)
{
    v1::StudyEvent e;
    e.mutable_run_pending()->set_run_id(str(runId));
    e.mutable_run_pending()->set_reason(str(reason));
    return e;
}

v1::StudyEvent attemptStarting(
    const QString &runId, int attempt, const QList<Portion> &portions, const QString &resize)
{
    v1::StudyEvent e;
    v1::AttemptStarting &m = *e.mutable_attempt_starting();
    m.set_run_id(str(runId));
    m.set_attempt(attempt);
    for (const Portion &p : portions) {
        v1::PortionRecord &r = *m.add_portions();
        r.set_agent(str(p.agent));
        for (int rank : p.ranks)
            r.add_ranks(rank);
    }
    m.set_resize(str(resize));
    return e;
}

v1::StudyEvent attemptRunning(const QString &runId, int attempt, const QString &rendezvous)
{
    v1::StudyEvent e;
    v1::AttemptRunning &m = *e.mutable_attempt_running();
    m.set_run_id(str(runId));
    m.set_attempt(attempt);
    m.set_rendezvous(str(rendezvous));
    return e;
}

v1::StudyEvent attemptEnded(
    const QString &runId, int attempt, v1::AttemptOutcome outcome, const QString &reason)
{
    v1::StudyEvent e;
    v1::AttemptEnded &m = *e.mutable_attempt_ended();
    m.set_run_id(str(runId));
    m.set_attempt(attempt);
    m.set_outcome(outcome);
    m.set_reason(str(reason));
    return e;
}

v1::StudyEvent attemptResizing(const QString &runId, int attempt, const QString &reason)
{
    v1::StudyEvent e;
    v1::AttemptResizing &m = *e.mutable_attempt_resizing();
    m.set_run_id(str(runId));
    m.set_attempt(attempt);
    m.set_reason(str(reason));
    return e;
}

v1::StudyEvent runStalled(
    const QString &runId, int attempt, qint64 sinceUnixMs, qint64 lastStep, const QString &detail)
{
    v1::StudyEvent e;
    v1::RunStalled &m = *e.mutable_run_stalled();
    m.set_run_id(str(runId));
    m.set_attempt(attempt);
    m.set_since(sinceUnixMs);
    m.set_last_step(lastStep);
    m.set_detail(str(detail));
    return e;
}

v1::StudyEvent runUnstalled(const QString &runId, int attempt, double seconds)
{
    v1::StudyEvent e;
    v1::RunUnstalled &m = *e.mutable_run_unstalled();
    m.set_run_id(str(runId));
    m.set_attempt(attempt);
    m.set_seconds(seconds);
    return e;
}

v1::StudyEvent checkpointCopied(
    const QString &runId, int attempt, int epoch, const QString &agent, const QString &dir)
{
    v1::StudyEvent e;
    v1::CheckpointCopied &m = *e.mutable_checkpoint_copied();
    m.set_run_id(str(runId));
    m.set_attempt(attempt);
    m.set_epoch(epoch);
    m.set_agent(str(agent));
    m.set_dir(str(dir));
    return e;
}

v1::StudyEvent checkpointUploaded(
    const QString &runId, int attempt, int epoch, const QString &agent, const QString &from)
{
    v1::StudyEvent e;
    v1::CheckpointUploaded &m = *e.mutable_checkpoint_uploaded();
    m.set_run_id(str(runId));
    m.set_attempt(attempt);
    m.set_epoch(epoch);
    m.set_agent(str(agent));
    m.set_from(str(from));
    return e;
}

v1::StudyEvent cancelRequested(const QString &runId)
{
    v1::StudyEvent e;
    e.mutable_cancel_requested()->set_run_id(str(runId));
    return e;
}

v1::StudyEvent retryRequested(const QString &runId)
{
    v1::StudyEvent e;
    e.mutable_retry_requested()->set_run_id(str(runId));
    return e;
}

v1::StudyEvent agentsAdded(const QStringList &agents)
{
    v1::StudyEvent e;
    for (const QString &a : agents)
        e.mutable_agents_added()->add_agents(str(a));
    return e;
}

v1::StudyEvent lrFindFailed(const QString &reason, const QString &agent, bool finalAttempt)
{
    v1::StudyEvent e;
    v1::LrFindFailed &m = *e.mutable_lr_find_failed();
    m.set_reason(str(reason));
    m.set_agent(str(agent));
    m.set_final_attempt(finalAttempt);
    return e;
}

v1::StudyEvent networkProbed(const QJsonArray &probes, const QString &note)
{
    v1::StudyEvent e;
    v1::NetworkProbed &m = *e.mutable_network_probed();
    for (const QJsonValue &p : probes)
        *m.add_probes() = toStruct(p.toObject());
    m.set_note(str(note));
    return e;
}

v1::StudyEvent trialDecision(const TrialDecision &decision)
{
    v1::StudyEvent e;
    *e.mutable_trial_decision() = decisionRecord(decision);
    return e;
}

v1::StudyEvent trialContinued(const QString &runId, int epochs)
{
    v1::StudyEvent e;
    e.mutable_trial_continued()->set_run_id(str(runId));
    e.mutable_trial_continued()->set_epochs(epochs);
    return e;
}

v1::StudyEvent studyEnded(const QString &state)
{
    v1::StudyEvent e;
    e.mutable_study_ended()->set_state(str(state));
    return e;
}

} // namespace scalelab::core::journal_events
