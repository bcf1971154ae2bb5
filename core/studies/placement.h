// Where the ranks of a run go: a pure function of the run's needs and what the agents
// reported in Describe. Ranks are numbered through the portions in order, so the
// first portion holds rank 0 and its agent hosts the rendezvous.
#pragma once

#include "study_model.h"

#include <QList>
#include <QString>
#include <QStringList>

namespace scalelab::core {

struct NodeCapacity {
    QString agent; // the agent's name in the study (its address)
    QString host; // hostname: agents on one host share its cores
    bool reachable = false;
    QString error; // why it is not reachable
    int cpuCores = 0;
    int freeSlots = 0; // ranks it can still take (Describe.free_slots)
    int gpus = 0;
    double gpusInUse = 0; // by runs of this study that it hosts now
    bool busy = false; // hosts (or shares a host with) a running run of this study
    QStringList datasets; // the data sets in its data folder (Describe.datasets)
    qint64 freeBytes = -1; // in its state folder (Describe.storage); -1 = not known
};

struct Portion {
    QString agent;
    QList<int> ranks;
    bool operator==(const Portion &) const = default;
};

enum class PlacementPolicy { Pack, Spread };

struct Placement {
    QList<Portion> portions; // empty when the run cannot be placed now
    QString reason; // why not, in words a user can act on
    bool infeasible = false; // cannot fit even on idle agents (not just busy now)
    bool ok() const { return !portions.isEmpty(); }
};

// `exclusive`: a run only goes to hosts that run nothing else of the study, so the
// measured times are not skewed by a neighbour (the default of a scale-up study).
// `dataset`, when given: only agents that hold it take ranks; with none, the run is
// infeasible (and says which data sets the agents do have).
Placement placeRun(const RunConfig &config, const QList<NodeCapacity> &nodes, PlacementPolicy policy,
    bool exclusive, const QString &dataset = {});

// The agents a spread run's first attempt, placed as `placement` on `candidates`, is worth
// waiting for: those in `known` (they have answered before) that did not answer now, when
// with them it would be on more agents, so ranks planned apart would share one. A Describe
// a loaded agent answers late would otherwise double ranks up for the whole run (a fresh
// clone's suite saw it twice: an agent just back from the network probe left out). Empty:
// place now. The caller bounds the wait.
QStringList spreadWaitsFor(
    const Placement &placement, const QList<NodeCapacity> &candidates, int workers, const QStringList &known);

// An elastic run (RunConfig::elastic) that does not fit at its planned size: the largest
// size from workers - 1 down to minWorkers that fits now, then the fewest workers that give
// a step as short (a step takes ceil(K / world) micro-batches per worker, K =
// config.batchesPerStep(), so 3 workers are no faster than 2 at K = 4 and hold a worker
// more). Its portions number the ranks of that smaller world; empty when none fits.
// `most`: no more workers than that (the ranks it still has after losing a host).
Placement placeElastic(const RunConfig &config, const QList<NodeCapacity> &nodes, PlacementPolicy policy,
    bool exclusive, const QString &dataset = {}, int most = 0);

// The micro-batches each worker of an attempt of `world` workers computes per step (the
// most any worker does): ceil(K / world).
int microBatchesPerWorker(const RunConfig &config, int world);

} // namespace scalelab::core
