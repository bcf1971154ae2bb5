// Where a run's checkpoints travel, decided from the study's state alone: pure rules, no
// I/O, so the runner's copy and upload decisions are tested without agents.
//
// The console keeps a copy of each run's newest committed checkpoint (downloaded from
// the agent of rank 0, which wrote it) so that a retry can resume on another agent even
// when the one that wrote it is gone. The runner:
//   on a committed checkpoint      if (wantCopy(...)) queue it (the newest per run wins);
//   when a download ends           switch (copyLanding(...)) record, discard or give up;
//   before an attempt starts       if (const auto up = uploadBeforeStart(run)) send the copy.
//
// Thread: any (values only).
#pragma once

#include "core_status.h"
#include "study_state.h"

#include <QString>

#include <optional>

namespace scalelab::core {

// One checkpoint to download: run, the attempt and agent that committed it, its epoch.
struct CopyRequest {
    QString runId;
    int attempt = 0;
    int epoch = 0;
    QString agent; // rank 0's, which committed it
    bool operator==(const CopyRequest &) const = default;
};

// Whether `request` is worth downloading: the run exists, the console holds an older copy
// (or none), no download of this run at this epoch or newer is in flight, and an earlier
// failure did not already give up on this epoch or a newer one. `queued` is the run's
// request already waiting, if any; a newer request replaces it.
[[nodiscard]] bool wantCopy(const RunProgress *run, const CopyRequest &request,
    const std::optional<CopyRequest> &inFlight, const CopyRequest *queued, int gaveUpAtEpoch);

// The last checkpoint of a run is never copied (nothing is left to resume after it).
[[nodiscard]] bool copyWorthwhile(const RunProgress &run, int checkpointEpoch);

enum class CopyLanding {
    Record, // journal checkpoint_copied: a retry may resume from it
    Discard, // the run succeeded meanwhile: the copy is of no use, remove it
    GiveUp, // the download failed: not asked again for this epoch
};
[[nodiscard]] CopyLanding copyLanding(const RunProgress *run, bool downloaded);

// The agent that must be sent the console's copy before the run's next attempt starts:
// rank 0's (the first portion's), when the copy was written elsewhere and has not been
// sent to this attempt yet. Nothing when there is no copy or no need.
struct Upload {
    QString target;
    int epoch = 0;
    QString from; // the agent that wrote it
};
[[nodiscard]] std::optional<Upload> uploadBeforeStart(const RunProgress &run);

// Whether a refused upload is worth another attempt: an agent that found the copy
// malformed (isInvalidArgument()) will refuse it again.
[[nodiscard]] bool uploadRetryable(const Status &refusal);

} // namespace scalelab::core
