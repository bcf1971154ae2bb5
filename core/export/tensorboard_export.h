// Studies and runs as TensorBoard log folders (docs/results.md, "TensorBoard"): what the
// journal holds (its state events and the run events stored beside them, as the reports
// read them) written as TensorBoard's event files, after the fact (exportToTensorBoard) or
// as the events arrive (TensorBoardLive, tensorboard_live.h).
//
// The layout of DIR:
//   DIR/.scalelab-export                    the study (or single run) the folder belongs to
//   DIR/events.out.tfevents.*               the hparams experiment (a whole study's export)
//   DIR/r02-2workers-b64/events.out...      one folder per run, named by its configuration:
//                                           its id after the study's ("r02"; a tune's trial
//                                           "t03"; a single run its whole id), workers, batch
//   DIR/study/events.out...                 the study's scaling, step = worker count
// Tags (tensorBoardTags() below; only values that were measured, none made up):
//   train/loss, train/lr, train/grad_norm, train/images_per_second, step/seconds,
//   step/compute_seconds, step/exposed_allreduce_seconds       per optimizer step (rank 0's);
//     the split only on CPU (on a GPU host-side times do not split a step)
//   epoch/train_loss, epoch/train_accuracy, epoch/test_loss, epoch/test_accuracy,
//   epoch/images_per_second, epoch/seconds                      per epoch, step = epoch (1-based)
//   run/wall_seconds, run/speedup, run/efficiency, run/time_to_target_seconds
//                                                               once, at the run's last step
//   scaling/speedup, scaling/efficiency, scaling/images_per_second, scaling/speedup_to_target,
//   scaling/efficiency_to_target                                in study/, step = workers; a
//     suffix ("scaling/speedup/b32") when the study's configurations differ beyond workers
//   run/description, study/description                         text (markdown); a SYNTHETIC
//                                                               data set says so there and in
//                                                               the hparams' dataset value
// A run's hyperparameters go to TensorBoard's hparams plugin (its HParams tab): the
// configuration, and what rank 0 reported training with once it started.
//
// A folder is refused when it holds another study's export or event files ScaleLab did not
// write; this study's own files in it are replaced. One thread at a time.
#pragma once

#include "core_status.h"
#include "journal.h"
#include "study_model.h"

#include <QString>
#include <QStringList>

namespace scalelab::core {

// Every scalar tag the export writes, per step, per epoch, per run and per study.
QStringList tensorBoardTags();

// "r02-2workers-b64" for run "s1-r02" of study "s1" (1 worker: "r01-1worker-b64"); a run
// id that does not start with the study's is kept whole.
QString tensorBoardRunFolder(const QString &studyId, const QString &runId, int workers, int batchSize);

struct TensorBoardExport {
    QString dir;
    QString owner; // the study (or single run) DIR holds
    QStringList files; // the event files written, relative to dir
    int runs = 0; // run folders written
    qint64 scalars = 0;
    bool synthetic = false; // a run trained on a SYNTHETIC data set
};

// Writes `id` from `journal` into `dir`: a study (every run that started, the hparams
// experiment and the study's scaling), one run of a study (its folder only), or a single
// run of the console's Run tab. Each run's series are its attempts' events folded as the
// reports fold them: a retry resumed from epoch k replaces what came after epoch k.
// NotFound: no such study or run; AlreadyExists: `dir` holds another export or foreign
// event files; PermissionDenied: `dir` cannot be written.
Result<TensorBoardExport> exportToTensorBoard(const Journal &journal, const QString &id, const QString &dir);

} // namespace scalelab::core
