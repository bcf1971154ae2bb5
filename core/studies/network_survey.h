// The network between a study's hosts, probed once before its runs (issue 37): when a run
// has several workers and the plan does not skip probes (training.skipNetworkProbe), the
// runs wait for it (StudyState::waitsForNetworkProbe). With the agents on two or more hosts
// it runs network_probe.h's probes, dealt over the hosts at world sizes 2, 4, 8 … N (N the
// plan's most workers) and 2 ranks on one host, and journals them (network_probed,
// probeJson each); with one host it journals at once that each run's own probe measures it
// (no probe of its own is needed there). A probe that fails is journaled with why; the study
// goes on either way. The StudyRunner:
//
//   if (study.waitsForNetworkProbe()) survey.probe(nodes);   // each tick: starts it when due
//
// One survey at a time, on a thread of its own with clients of its own; its end is handled
// on the runner's thread (posted to `context`). Owned by the StudyRunner, whose
// RunnerContext and `context` outlive it. Thread: the runner's. The destructor stops a
// survey in progress (its probe runs are stopped on the agents) and waits for its thread.
#pragma once

#include "placement.h"

#include <QJsonArray>
#include <QList>
#include <QString>

#include <atomic>
#include <thread>

class QObject;

namespace scalelab::core {

class RunnerContext;

class NetworkSurvey {
public:
    NetworkSurvey(RunnerContext &runner, QObject *context);
    ~NetworkSurvey();
    NetworkSurvey(const NetworkSurvey &) = delete;
    NetworkSurvey &operator=(const NetworkSurvey &) = delete;

    // Starts the survey over the reachable `nodes`, unless one runs or the runner stopped.
    void probe(const QList<NodeCapacity> &nodes);

    // The world sizes probed for a plan whose largest run has `maxWorkers`: the powers of two
    // from 2, and N.
    static QList<int> worldSizes(int maxWorkers);

private:
    void surveyed(const QJsonArray &probes, const QString &note);

    RunnerContext &m_runner;
    QObject *m_context;
    std::thread m_thread;
    bool m_probing = false;
    std::atomic<bool> m_cancel { false };
};

} // namespace scalelab::core
