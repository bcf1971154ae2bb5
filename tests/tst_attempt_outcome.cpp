// How a run attempt ends, from what its portions came to (core/studies/attempt_outcome.h):
// when an unreachable agent counts as lost, what stops the others, the outcome and the
// reason in words, and what a failure is blamed on and whether it is retried; and where a
// run's checkpoints travel (core/studies/checkpoint_shuttle.h).
#include "attempt_outcome.h"
#include "checkpoint_shuttle.h"

#include <QTest>

using namespace scalelab::core;

namespace {

constexpr qint64 kNow = 1'000'000;

PortionState portion(const QString &agent, const QString &outcome = {}, const QString &message = {})
{
    PortionState p;
    p.agent = agent;
    p.outcome = outcome;
    p.message = message;
    return p;
}

std::vector<PortionState *> all(std::vector<PortionState> &ps)
{
    std::vector<PortionState *> out;
    for (auto &p : ps)
        out.push_back(&p);
    return out;
}

void mark(std::vector<PortionState> &ps, qint64 now = kNow, bool cancelling = false)
{
    markLostPortions(
        all(ps), now, /*collectiveSeconds=*/120, cancelling, /*refusedForMs=*/3000,
        [](const QString &agent) { return QStringLiteral("node %1").arg(agent); },
        [](qint64 ms) { return QStringLiteral("t%1").arg(ms); });
}

} // namespace

class TestAttemptOutcome : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void everyPortionSucceeded()
    {
        std::vector<PortionState> ps { portion("a", "SUCCEEDED"), portion("b", "SUCCEEDED") };
        QVERIFY(allPortionsEnded(all(ps)));
        QVERIFY(!anyPortionFailed(all(ps)));
        const AttemptOutcome o = attemptOutcome(all(ps), false);
        QCOMPARE(o.outcome, QStringLiteral("SUCCEEDED"));
        QVERIFY(o.reason.isEmpty());
        QVERIFY(o.lostAgents.isEmpty());
    }

    // Refused connections: the agent's process is gone, its ranks with it — after 3 s.
    void aRefusingAgentIsLostAfterItsGrace()
    {
        std::vector<PortionState> ps { portion("a"), portion("b") };
        ps[1].unreachableSinceMs = kNow - 2999;
        ps[1].unreachableError = QStringLiteral("Connection refused");
        mark(ps);
        QVERIFY(ps[1].outcome.isEmpty());
        mark(ps, kNow + 1);
        QCOMPARE(ps[1].outcome, QStringLiteral("LOST"));
        QCOMPARE(ps[1].message,
            QStringLiteral("node b unreachable since t%1 (Connection refused)").arg(kNow - 2999));
        QVERIFY(anyPortionFailed(all(ps)));
        QVERIFY(!allPortionsEnded(all(ps))); // a: still to be stopped
    }

    // Silent (not refusing): waited for as long as a collective may wait, plus a minute,
    // unless another portion failed (its ranks have no peers left) or the attempt is cancelled.
    void aSilentAgentIsWaitedForAsLongAsACollective()
    {
        std::vector<PortionState> ps { portion("a"), portion("b") };
        ps[1].unreachableSinceMs = kNow - 180'000;
        ps[1].unreachableError = QStringLiteral("Deadline Exceeded");
        mark(ps);
        QVERIFY(ps[1].outcome.isEmpty()); // 180 s = 120 + 60: not longer
        mark(ps, kNow + 1);
        QCOMPARE(ps[1].outcome, QStringLiteral("LOST"));

        std::vector<PortionState> failed { portion("a", "FAILED", "rank 0 exited 1"), portion("b") };
        failed[1].unreachableSinceMs = kNow - 1;
        mark(failed);
        QCOMPARE(failed[1].outcome, QStringLiteral("LOST"));

        std::vector<PortionState> cancelled { portion("a"), portion("b") };
        cancelled[1].unreachableSinceMs = kNow - 1;
        mark(cancelled, kNow, /*cancelling=*/true);
        QCOMPARE(cancelled[1].outcome, QStringLiteral("LOST"));
    }

    // A portion that succeeded leaves the silent one alone: it may well have finished too.
    // (Before bf8f0cc any ended portion, a successful one too, made the silent one LOST.)
    void aSuccessDoesNotOrphanTheOthers()
    {
        std::vector<PortionState> ps { portion("a", "SUCCEEDED"), portion("b") };
        ps[1].unreachableSinceMs = kNow - 60'000;
        ps[1].unreachableError = QStringLiteral("Deadline Exceeded");
        mark(ps);
        QVERIFY(ps[1].outcome.isEmpty());
        QVERIFY(!anyPortionFailed(all(ps)));
    }

    void lostAgentsComeFirstInTheReason()
    {
        std::vector<PortionState> ps { portion("a", "FAILED", "rank 0: peer closed the connection"),
            portion("b", "LOST", "node b unreachable since 10:00:00 (refused)"),
            portion("c", "LOST", "node c unreachable since 09:59:00 (refused)") };
        ps[1].unreachableSinceMs = 2000;
        ps[2].unreachableSinceMs = 1000;
        const AttemptOutcome o = attemptOutcome(all(ps), false);
        QCOMPARE(o.outcome, QStringLiteral("FAILED"));
        QCOMPARE(o.reason,
            QStringLiteral(
                "node b unreachable since 10:00:00 (refused); node c unreachable since 09:59:00 (refused); "
                "then on the other agents: rank 0: peer closed the connection"));
        QCOMPARE(o.failure, o.reason);
        QVERIFY(o.retry);
        QCOMPARE(o.lostAgents, (QStringList { QStringLiteral("b"), QStringLiteral("c") }));
        QCOMPARE(o.lostSinceMs, 1000);
    }

    void cancellingEndsCancelled()
    {
        std::vector<PortionState> ps { portion("a", "CANCELLED"), portion("b", "FAILED", "stopped") };
        const AttemptOutcome o = attemptOutcome(all(ps), true);
        QCOMPARE(o.outcome, QStringLiteral("CANCELLED"));
        QCOMPARE(o.reason, QStringLiteral("cancelled by the user"));
    }

    // A divergence is the cause (its peers only lost their partner) and is not retried: it
    // would diverge again from its checkpoint. A full disk is the cause too, and is retried.
    void divergenceAndFullDiskAreTheCause()
    {
        std::vector<PortionState> diverged { portion("a", "FAILED", "lost its peer"),
            portion("b", "FAILED", "loss diverged at step 40") };
        diverged[1].diverged = true;
        diverged[0].spaceNeeded = 1 << 20;
        AttemptOutcome o = attemptOutcome(all(diverged), false);
        QCOMPARE(o.failure, QStringLiteral("loss diverged at step 40"));
        QVERIFY(!o.retry);
        QVERIFY(o.spaceShortOn.isEmpty());

        std::vector<PortionState> full { portion("a", "FAILED", "lost its peer"),
            portion("b", "FAILED", "checkpoint of epoch 2 does not fit: 1.0 MiB needed") };
        full[1].spaceNeeded = 1 << 20;
        o = attemptOutcome(all(full), false);
        QCOMPARE(o.failure, QStringLiteral("checkpoint of epoch 2 does not fit: 1.0 MiB needed"));
        QCOMPARE(o.reason, o.failure); // said first, not the peer's lost connection
        QVERIFY(o.retry);
        QCOMPARE(o.spaceShortOn, QStringLiteral("b"));
        QCOMPARE(o.spaceNeeded, qint64(1 << 20));
    }

    // A committed checkpoint is copied when it is newer than the console's copy, than the
    // download in flight and than the request already waiting, and not one given up on.
    void onlyNewerCheckpointsAreCopied()
    {
        RunProgress run;
        run.planned.runId = QStringLiteral("r01");
        run.planned.config.epochs = 5;
        run.checkpoint.epoch = 2;
        const CopyRequest e3 { QStringLiteral("r01"), 1, 3, QStringLiteral("a") };
        const CopyRequest e4 { QStringLiteral("r01"), 1, 4, QStringLiteral("a") };
        QVERIFY(wantCopy(&run, e3, std::nullopt, nullptr, 0));
        QVERIFY(!wantCopy(nullptr, e3, std::nullopt, nullptr, 0)); // an unknown run
        QVERIFY(
            !wantCopy(&run, { QStringLiteral("r01"), 1, 2, QStringLiteral("a") }, std::nullopt, nullptr, 0));
        QVERIFY(!wantCopy(&run, e3, e3, nullptr, 0)); // already downloading it
        QVERIFY(!wantCopy(&run, e3, e4, nullptr, 0)); // a newer one is downloading
        QVERIFY(wantCopy(&run, e4, e3, nullptr, 0)); // newer than the one in flight
        QVERIFY(
            wantCopy(&run, e3, CopyRequest { QStringLiteral("r02"), 1, 9, {} }, nullptr, 0)); // another run's
        QVERIFY(wantCopy(&run, e4, std::nullopt, &e3, 0)); // replaces an older waiting one
        QVERIFY(!wantCopy(&run, e3, std::nullopt, &e4, 0));
        QVERIFY(!wantCopy(&run, e3, std::nullopt, nullptr, 3)); // failed once: not asked again
        QVERIFY(wantCopy(&run, e4, std::nullopt, nullptr, 3)); // a newer one is
        // The last checkpoint is never worth copying: nothing resumes after it.
        QVERIFY(copyWorthwhile(run, 4));
        QVERIFY(!copyWorthwhile(run, 5));
        QVERIFY(!copyWorthwhile(run, 0));
    }

    void aLandedCopyIsKeptUnlessTheRunSucceeded()
    {
        RunProgress run;
        run.phase = RunPhase::Running;
        QCOMPARE(copyLanding(&run, true), CopyLanding::Record);
        QCOMPARE(copyLanding(&run, false), CopyLanding::GiveUp);
        run.phase = RunPhase::Failed; // kept for `study retry`
        QCOMPARE(copyLanding(&run, true), CopyLanding::Record);
        run.phase = RunPhase::Succeeded;
        QCOMPARE(copyLanding(&run, true), CopyLanding::Discard);
        QCOMPARE(copyLanding(&run, false), CopyLanding::Discard);
    }

    // Before an attempt starts, rank 0's agent is sent the console's copy when it did not
    // write it itself and this attempt has not been sent it yet.
    void theCopyGoesToRankZerosAgentOnce()
    {
        RunProgress run;
        QVERIFY(!uploadBeforeStart(run)); // no copy, no portions
        run.checkpoint = CopiedCheckpoint { 3, 1, QStringLiteral("gone:1"),
            QStringLiteral("/s/checkpoints/r/epoch-0003") };
        run.portions
            = { Portion { QStringLiteral("new:1"), { 0 } }, Portion { QStringLiteral("gone:1"), { 1 } } };
        run.attempts = { AttemptRecord {} };
        const auto upload = uploadBeforeStart(run);
        QVERIFY(upload.has_value());
        QCOMPARE(upload->target, QStringLiteral("new:1"));
        QCOMPARE(upload->epoch, 3);
        QCOMPARE(upload->from, QStringLiteral("gone:1"));
        run.attempts.last().transferredEpoch = 3;
        QVERIFY(!uploadBeforeStart(run)); // sent already
        run.attempts.last().transferredEpoch = 0;
        run.portions.first().agent = QStringLiteral("gone:1"); // it wrote it: it holds it
        QVERIFY(!uploadBeforeStart(run));
        QVERIFY(
            uploadRetryable(Status::failure(Status::Code::Unavailable, QStringLiteral("agent unreachable"))));
        QVERIFY(!uploadRetryable( // refused again
            Status::failure(Status::Code::InvalidArgument, QStringLiteral("the copy is malformed"))));
    }
};

QTEST_GUILESS_MAIN(TestAttemptOutcome)
#include "tst_attempt_outcome.moc"
