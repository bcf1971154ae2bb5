// What a user asks for when launching one run, validated before anything is sent.
// The agent validates again (the proto is the contract); this gives earlier, friendlier
// messages in the form and the CLI.
#pragma once

#include "core_status.h"

#include "scalelab/v1/agent.pb.h"

#include <QString>
#include <QStringList>

namespace scalelab::core {

struct RunRequest {
    QString dataset; // a data set name on the agent
    int workers = 1;
    int batchSize = 64; // per worker and micro-batch
    int accumulationSteps = 1; // micro-batches a worker adds up before a step's all-reduce
    // `--workers MIN:MAX`: the run may start with as few as minWorkers when the agent has
    // fewer free slots than `workers`, at the global batch of `workers` (each worker then
    // accumulates more). 0: a fixed size. startWorkers: the ranks started (0 = workers).
    int minWorkers = 0;
    int startWorkers = 0;
    int epochs = 1;
    double learningRate = 0; // 0 = the trainer's default
    int threadsPerWorker = 0; // 0 = automatic
    quint64 seed = 1;
    qint64 maxTrainImages = 0; // 0 = whole split
    qint64 maxTestImages = 0;
    QString model; // empty: the worker's default (seed-cnn)

    // Success when the request is valid, else every problem, one sentence each, naming
    // the field ("batch size: must be between 1 and 65536 (got 70000)").
    CheckStatus check() const;

    v1::StartWorkersRequest toStartWorkers(const QString &runId) const;
};

// "run-20261121-224500-3fa2": sortable, unique enough, safe as a folder name.
QString newRunId();

} // namespace scalelab::core
