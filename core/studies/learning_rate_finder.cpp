#include "learning_rate_finder.h"

#include "journal_events.h"
#include "model_upload.h"
#include "plan_models.h"
#include "worker_contract.h"

#include "runner_context.h"
#include "spec_rules.h"

#include <QDateTime>
#include <QJsonArray>
#include <QJsonObject>
#include <QMetaObject>
#include <QObject>

#include <cmath>

namespace scalelab::core {

LearningRateFinder::LearningRateFinder(RunnerContext &runner, QObject *context)
    : m_runner(runner)
    , m_context(context)
{ }

LearningRateFinder::~LearningRateFinder()
{
    m_cancel = true; // the test's callback returns false: the agent stops its worker
    if (m_thread.joinable())
        m_thread.join();
}

void LearningRateFinder::search(const QList<NodeCapacity> &nodes)
{
    if (m_searching || !m_runner.driving() || QDateTime::currentMSecsSinceEpoch() < m_notBefore)
        return;
    const StudyState &state = m_runner.study();
    const QString dataset = QString::fromStdString(state.plan().dataset());
    const NodeCapacity *node = nullptr;
    for (const NodeCapacity &n : nodes)
        if (n.reachable && n.freeSlots > 0 && n.datasets.contains(dataset) && m_runner.client(n.agent)) {
            node = &n;
            break;
        }
    if (!node) {
        m_notBefore = QDateTime::currentMSecsSinceEpoch() + 10'000; // say it every 10 s, not every tick
        m_runner.say(
            QStringLiteral("learning rate \"auto\": waiting for an agent with data set %1 and a free "
                           "slot to run the range test")
                .arg(dataset));
        return;
    }
    // At the baseline's global batch (the first run of the plan, the baseline unless skipped).
    const QList<PlannedRun> planned = expandPlan(state.plan(), state.studyId());
    const RunConfig first = planned.isEmpty() ? RunConfig {} : planned.first().config;
    const int batch = std::max(1, first.batchSize * std::max(1, first.workers));
    v1::FindLearningRateRequest request;
    *request.mutable_spec() = runSpecFor(state.plan(), first);
    request.mutable_spec()->set_batch_size(batch);
    request.mutable_spec()->set_gpus_per_worker(0);
    request.mutable_spec()->set_threads_per_worker(0);
    const AgentEndpoint endpoint = *m_runner.endpoint(node->agent); // known: it has a client
    const QString agent = node->agent;
    m_searching = true;
    m_cancel = false;
    m_runner.say(QStringLiteral("learning rate \"auto\": range test on %1 at batch %2 (about 200 steps)")
                     .arg(m_runner.agentLabel(agent))
                     .arg(batch));
    if (m_thread.joinable())
        m_thread.join();
    m_thread = std::thread([this, request, endpoint, agent, batch, context = m_context,
                               store = m_runner.modelStore()] {
        AgentClient c(endpoint.address, endpoint.token, endpoint.tls.orEnvironment());
        QList<QPair<double, double>> points;
        v1::LrFindResult found;
        // A module the plan names by sum goes to the agent first, as for a run.
        Status sent = Status::success();
        for (const std::string &model : { request.spec().model(), request.spec().initial_weights() })
            if (sent.ok() && worker::isModelSha256(model)) {
                const auto file = storedModelFile(store, QString::fromStdString(model));
                const auto read
                    = file ? readModelFile(*file) : Result<ModelFile>(Status::failure(file.error()));
                v1::StoredModel stored;
                sent = read ? sendModel(&c, *read, &stored) : Status::failure(read.error());
            }
        const Status result = !sent.ok() ? sent
                                         : c.findLearningRate(
                                             request,
                                             [&](const v1::LrFindProgress &progress) {
                                                 for (const auto &p : progress.points())
                                                     points.append({ p.learning_rate(), p.smoothed_loss() });
                                                 return !m_cancel.load();
                                             },
                                             &found);
        QMetaObject::invokeMethod(
            context,
            [this, agent, batch, result, found, points] { searched(agent, batch, result, found, points); },
            Qt::QueuedConnection);
    });
}

void LearningRateFinder::searched(const QString &agent, int batch, const Status &result,
    const v1::LrFindResult &found, const QList<QPair<double, double>> &points)
{
    if (m_thread.joinable())
        m_thread.join();
    m_searching = false;
    if (!m_runner.driving())
        return;
    constexpr int kMaxFailures = 3;
    if (!result.ok() || !(found.suggested_learning_rate() > 0)) {
        const QString reason = result.ok() ? QStringLiteral("no usable suggestion") : result.error();
        const bool final = m_runner.study().learningRateSearch().failures + 1 >= kMaxFailures;
        m_runner.record(journal_events::lrFindFailed(reason, agent, final));
        m_notBefore = QDateTime::currentMSecsSinceEpoch() + 10'000;
        m_runner.say(QStringLiteral("learning rate \"auto\": the range test on %1 failed (%2)%3")
                         .arg(m_runner.agentLabel(agent), reason,
                             final ? QStringLiteral("; the runs fail with it")
                                   : QStringLiteral("; trying again in 10 s")));
        return;
    }
    // An inconclusive test (the loss never clearly fell) says nothing: the default stays.
    const double lr = found.conclusive() ? found.suggested_learning_rate() : rules::kDefaultLearningRate;
    const QString rule = found.conclusive() ? QString::fromStdString(found.rule())
                                            : QStringLiteral("inconclusive, so the default %1 is used: %2")
                                                  .arg(rules::kDefaultLearningRate)
                                                  .arg(QString::fromStdString(found.note()));
    v1::StudyEvent event;
    v1::LrFound &m = *event.mutable_lr_found();
    m.set_learning_rate(lr);
    m.set_batch(batch);
    m.set_agent(agent.toStdString());
    m.set_min_loss_lr(found.min_loss_learning_rate());
    m.set_steepest_lr(found.steepest_learning_rate());
    m.set_steps(found.steps());
    m.set_stopped_early(found.stopped_early());
    m.set_rule(rule.toStdString());
    m.set_conclusive(found.conclusive());
    // Up to 200 points keep the curve for reports without swelling the journal.
    const int stride = std::max(1, int(points.size()) / 200);
    for (int i = 0; i < points.size(); i += stride) {
        v1::LearningRatePoint &point = *m.add_points();
        point.set_learning_rate(points[i].first);
        point.set_smoothed_loss(std::isfinite(points[i].second) ? points[i].second : 0.0);
    }
    if (!m_runner.record(event))
        return;
    m_runner.say(QStringLiteral("learning rate \"auto\": %1 at batch %2 (%3), from the range test on %4")
                     .arg(QString::number(lr, 'g', 4))
                     .arg(batch)
                     .arg(rule, m_runner.agentLabel(agent)));
    m_runner.tickSoon();
}

} // namespace scalelab::core
