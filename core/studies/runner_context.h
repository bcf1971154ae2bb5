// What a StudyRunner lends the parts it owns (CheckpointCourier in checkpoint_courier.h,
// LearningRateFinder in learning_rate_finder.h, NetworkSurvey in network_survey.h): the study as the journal
// has it, the agents, the journal to record in, and the runner's voice. StudyRunner implements it; a part
// keeps a reference, so the runner outlives the parts it owns.
//
//   if (!runner.driving()) return;                         // crashed or finished: start nothing
//   if (!runner.record(journal_events::runPending(id, why))) return;  // journaled first, then acted on
//   runner.say(QStringLiteral("…"));                       // StudyRunner::message
//
// Thread: the runner's only. A part's worker thread never calls it: it posts its result
// to the runner's thread first.
#pragma once

#include "agent_client.h"
#include "agent_endpoint.h"
#include "study_state.h"

#include "scalelab/v1/journal.pb.h"

#include <QJsonObject>
#include <QString>

namespace scalelab::core {

class RunnerContext {
public:
    // The study as the journal has it; record() changes it.
    [[nodiscard]] virtual const StudyState &study() const = 0;
    // False once the runner crashed (setCrashAfterEvents) or the study finished.
    [[nodiscard]] virtual bool driving() const = 0;
    // How to reach `agent`; nullptr for an agent this console does not know.
    [[nodiscard]] virtual const AgentEndpoint *endpoint(const QString &agent) const = 0;
    // The runner's client of `agent` (made on first use); nullptr for an unknown agent.
    virtual AgentClient *client(const QString &agent) = 0;
    // "agent 10.0.0.2:7450 (hostB)"
    [[nodiscard]] virtual QString agentLabel(const QString &agent) const = 0;
    // Journals a state change and applies it to study(); false when it was not kept (the
    // journal failed, or the runner crashed): then act on nothing.
    virtual bool record(const v1::StudyEvent &event) = 0;
    // What happens, in words (emitted as StudyRunner::message).
    virtual void say(const QString &line) = 0;
    // Drives the study again as soon as the event loop allows (one more tick).
    virtual void tickSoon() = 0;
    // Where the console keeps the TorchScript modules its studies train (plan_models.h).
    [[nodiscard]] virtual QString modelStore() const = 0;

protected:
    ~RunnerContext() = default;
};

} // namespace scalelab::core
