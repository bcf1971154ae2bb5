// The network between agents, measured on demand (`scalelab-cli probe`): probe-only runs
// (agent.proto's RunSpec.probe_only) of 2 … N ranks, once with every rank on one host and
// once with the ranks dealt over the hosts, each timing c10d all-reduces of 4 KB to 64 MB
// (the probe a run does before training), and the latency α and bandwidth β of a ring
// all-reduce fitted to each (scaling_model.h's fitLink).
//
//   QList<ProbeAgent> agents = …;  // from Describe: name, host, client
//   for (const ProbeLayout &layout : planProbes(agents, { 2, 3, 4 }))
//       ProbeOutcome o = runProbe(layout, clients);  // blocks; needs a Qt event loop thread
//
// planProbes is a pure function; runProbe talks to the agents (blocking gRPC calls, and an
// event loop of its own while it follows rank 0).
#pragma once

#include "agent_client.h"
#include "placement.h"
#include "scaling_model.h"
#include "study_model.h"

#include <QJsonObject>
#include <QList>
#include <QMap>
#include <QString>

#include <functional>

namespace scalelab::core {

struct ProbeAgent {
    QString name; // the address it was given as
    QString host; // its hostname (Describe): agents on one host share its network
};

struct ProbeLayout {
    int worldSize = 2;
    bool acrossHosts = false; // the ranks dealt over hosts; false: all on one host
    QStringList hosts; // the hosts the ranks are on
    QList<Portion> portions; // by agent name; the first holds rank 0
    QString text() const; // "2 ranks on hostA", "4 ranks over hostA, hostB"
};

// For each world size: every rank on the first agent (one host), and, when the agents are
// on two or more hosts, the ranks dealt round-robin over one agent per host (rank r on the
// (r mod hosts)-th). World sizes below 2 are left out.
QList<ProbeLayout> planProbes(const QList<ProbeAgent> &agents, const QList<int> &worldSizes);

struct ProbeOutcome {
    ProbeLayout layout;
    QString runId;
    RunNetwork network; // as rank 0 reported it
    LinkFit fit;
    QString error; // why it measured nothing (empty when it did)
    double seconds = 0; // the whole probe, start to end
    bool ok() const { return error.isEmpty(); }
};

// Runs one probe as a run of its own (id "probe-…"): starts rank 0's portion, then the
// others at the rendezvous rank 0's agent chose, and follows rank 0's events until the run
// ends or `timeoutMs` passes (then every portion is stopped). `clients` by agent name.
// `cancelled`, when given, is asked every 200 ms: true stops the probe (an error "cancelled").
ProbeOutcome runProbe(const ProbeLayout &layout, const QMap<QString, AgentClient *> &clients,
    int timeoutMs = 180'000, const std::function<bool()> &cancelled = {});

// The outcome as JSON: layout, hosts, backend, the fitted latency and bandwidth, and each
// size's timed all-reduces (networkJson).
QJsonObject probeJson(const ProbeOutcome &outcome);

} // namespace scalelab::core
