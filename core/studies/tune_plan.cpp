#include "tune_plan.h"

#include "asha.h"
#include "qt_text.h"
#include "spec_rules.h"
#include "worker_contract.h"

#include <QJsonArray>
#include <QSet>

#include <algorithm>
#include <cmath>
#include <limits>

namespace scalelab::core {
namespace {

// What a search space may name: a RunSpec field (or the run's batch size, precision or model),
// the range a drawn value must stay in, and how it is shown.
struct Tunable {
    const char *name;
    const char *label;
    double min;
    double max;
    bool minOpen; // min itself is refused
    bool maxOpen;
    bool integer;
    bool word; // precision ("fp32" | "bf16") or model (worker_contract.h's names): choice only
};

constexpr double kUnbounded = std::numeric_limits<double>::infinity();

const QList<Tunable> &tunables()
{
    static const QList<Tunable> list {
        { "learningRate", "lr", 0, rules::kMaxLearningRate, true, false, false, false },
        { "momentum", "momentum", 0, 1, false, true, false, false },
        { "weightDecay", "wd", 0, 1, false, true, false, false },
        { "blockDropout", "block dropout", 0, 1, false, true, false, false },
        { "denseDropout", "dense dropout", 0, 1, false, true, false, false },
        { "batchSize", "batch", 1, rules::kMaxBatchSize, false, false, true, false },
        { "labelSmoothing", "smoothing", 0, 1, false, true, false, false },
        { "warmupEpochs", "warm-up", 0, kUnbounded, false, false, false,
            false }, // ≤ trialEpochs, checked apart
        { "precision", "precision", 0, 0, false, false, false, true },
        { "model", "model", 0, 0, false, false, false, true },
    };
    return list;
}

// The words a word tunable takes.
QStringList wordValues(const Tunable &t)
{
    if (QLatin1String(t.name) == QLatin1String("model")) {
        QStringList models;
        for (const auto name : worker::kModelNames)
            models << QString::fromLatin1(name.data(), qsizetype(name.size()));
        return models;
    }
    return { QStringLiteral("fp32"), QStringLiteral("bf16") };
}

const Tunable *findTunable(const QString &name)
{
    for (const auto &t : tunables())
        if (name == QLatin1String(t.name))
            return &t;
    return nullptr;
}

// SplitMix64 (Steele et al. 2014): the stream of trial i is a function of (seed, i) alone.
class Stream {
public:
    Stream(quint64 seed, quint64 index)
        : m_state(seed * 0x9E3779B97F4A7C15ULL ^ (index + 1) * 0xD1B54A32D192ED03ULL)
    { }
    quint64 next()
    {
        quint64 z = (m_state += 0x9E3779B97F4A7C15ULL);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        return z ^ (z >> 31);
    }
    // Uniform in [0, 1), 53 bits.
    double unit() { return double(next() >> 11) * 0x1.0p-53; }

private:
    quint64 m_state;
};

// A quantized value written as people write it: 0.30000000000000004 → 0.3.
double tidy(double v)
{
    return QString::number(v, 'g', 12).toDouble();
}

double quantize(double v, double q)
{
    return tidy(std::round(v / q) * q);
}

bool quantized(const std::string &kind)
{
    return kind == "quniform" || kind == "qloguniform" || kind == "qrandint";
}

// The value of `d` at u in [0, 1). Choice and the integer kinds are exact.
QJsonValue drawValue(const v1::Distribution &d, double u)
{
    const std::string &k = d.kind();
    if (k == "choice") {
        const int n = d.values_size();
        const int i = std::min(n - 1, int(std::floor(u * n)));
        const auto &v = d.values(i);
        if (v.has_string_value())
            return str(v.string_value());
        return v.number_value();
    }
    if (k == "uniform" || k == "quniform") {
        const double v = d.low() + u * (d.high() - d.low());
        return k == "quniform" ? quantize(v, d.q()) : v;
    }
    if (k == "loguniform" || k == "qloguniform") {
        const double v = std::exp(std::log(d.low()) + u * (std::log(d.high()) - std::log(d.low())));
        return k == "qloguniform" ? quantize(v, d.q()) : v;
    }
    if (k == "randint")
        return d.low() + std::floor(u * (d.high() - d.low()));
    // qrandint: an integer in [low, high], then rounded to a multiple of q (Ray's).
    return quantize(d.low() + std::floor(u * (d.high() - d.low() + 1)), d.q());
}

// The smallest and largest value `d` can give (choice: of its numbers).
std::pair<double, double> valueRange(const v1::Distribution &d)
{
    const std::string &k = d.kind();
    if (k == "choice") {
        double lo = kUnbounded, hi = -kUnbounded;
        for (const auto &v : d.values())
            if (v.has_number_value()) {
                lo = std::min(lo, v.number_value());
                hi = std::max(hi, v.number_value());
            }
        return { lo, hi };
    }
    if (k == "randint")
        return { d.low(), d.high() - 1 };
    if (quantized(k))
        return { quantize(d.low(), d.q()), quantize(d.high(), d.q()) };
    return { d.low(), d.high() };
}

QString rangeText(const Tunable &t)
{
    if (t.max == kUnbounded)
        return QStringLiteral("%1 or more").arg(t.min);
    return QStringLiteral("%1%2, %3%4")
        .arg(t.minOpen ? QLatin1Char('(') : QLatin1Char('['))
        .arg(t.min)
        .arg(t.max)
        .arg(t.maxOpen ? QLatin1Char(')') : QLatin1Char(']'));
}

bool inRange(const Tunable &t, double v)
{
    if (!std::isfinite(v))
        return false;
    const bool aboveMin = t.minOpen ? v > t.min : v >= t.min;
    const bool belowMax = t.maxOpen ? v < t.max : v <= t.max;
    return aboveMin && belowMax;
}

// A "choice": values there are, each of the hyperparameter's kind and range, none twice.
void checkChoice(const QString &at, const Tunable &tunable, const v1::Distribution &d, QStringList *p)
{
    if (d.values_size() == 0) {
        *p << QStringLiteral("%1.values: list the values to choose from").arg(at);
        return;
    }
    QSet<QString> seen;
    for (int i = 0; i < d.values_size(); ++i) {
        const auto &v = d.values(i);
        const QString where = QStringLiteral("%1.values[%2]").arg(at).arg(i);
        QString text;
        if (tunable.word) {
            text = str(v.string_value());
            const QStringList allowed = wordValues(tunable);
            const bool module = QLatin1String(tunable.name) == QLatin1String("model")
                && (worker::isModelFile(v.string_value()) || worker::isModelSha256(v.string_value()));
            if (!v.has_string_value() || (!allowed.contains(text) && !module))
                *p << QStringLiteral("%1: must be one of \"%2\"")
                          .arg(where, allowed.join(QStringLiteral("\", \"")));
        } else if (!v.has_number_value()) {
            *p << QStringLiteral("%1: must be a number").arg(where);
            continue;
        } else {
            text = QString::number(v.number_value(), 'g', 17);
            if (!inRange(tunable, v.number_value())
                || (tunable.integer && v.number_value() != std::floor(v.number_value())))
                *p << QStringLiteral("%1: must be %2 in %3 (got %4)")
                          .arg(where,
                              tunable.integer ? QStringLiteral("a whole number") : QStringLiteral("a number"),
                              rangeText(tunable), text);
        }
        if (seen.contains(text))
            *p << QStringLiteral("%1: %2 is listed twice").arg(where, text);
        seen.insert(text);
    }
}

// The other kinds: a range [low, high] (and a step q for the quantized ones) whose every
// draw is in the hyperparameter's range.
void checkRange(const QString &at, const QString &name, const Tunable &tunable, const v1::Distribution &d,
    const TuneSettings &settings, QStringList *p)
{
    const std::string &k = d.kind();
    if (tunable.word) {
        *p << QStringLiteral("%1.kind: %2 is a word; use \"choice\" with values [\"%3\"]")
                  .arg(at, name, wordValues(tunable).join(QStringLiteral("\", \"")));
        return;
    }
    if (d.values_size() > 0)
        *p << QStringLiteral("%1.values: only for kind \"choice\" (this one uses low and high)").arg(at);
    const qsizetype before = p->size();
    if (!std::isfinite(d.low()) || !std::isfinite(d.high()))
        *p << QStringLiteral("%1: low and high must be numbers").arg(at);
    else if (!(d.low() < d.high()))
        *p << QStringLiteral("%1.high: must be above low (got low %2, high %3)")
                  .arg(at)
                  .arg(d.low())
                  .arg(d.high());
    if ((k == "loguniform" || k == "qloguniform") && !(d.low() > 0))
        *p << QStringLiteral("%1.low: must be above 0 for %2 (got %3)").arg(at, str(k)).arg(d.low());
    if (k == "randint" || k == "qrandint") {
        if (d.low() != std::floor(d.low()) || d.high() != std::floor(d.high()))
            *p << QStringLiteral("%1: low and high must be whole numbers for %2").arg(at, str(k));
    } else if (tunable.integer) {
        *p << QStringLiteral("%1.kind: %2 takes whole numbers: use choice, randint or qrandint")
                  .arg(at, name);
    }
    if (quantized(k)) {
        if (!(d.q() > 0) || !std::isfinite(d.q()))
            *p << QStringLiteral("%1.q: must be above 0 for %2 (got %3)").arg(at, str(k)).arg(d.q());
        else if ((k == "qrandint") && d.q() != std::floor(d.q()))
            *p << QStringLiteral("%1.q: must be a whole number for qrandint (got %2)").arg(at).arg(d.q());
    } else if (d.q() != 0) {
        *p << QStringLiteral("%1.q: only for the quantized kinds (quniform, qloguniform, qrandint)").arg(at);
    }
    if (p->size() > before)
        return;
    const auto [lo, hi] = valueRange(d);
    if (!inRange(tunable, lo) || !inRange(tunable, hi))
        *p << QStringLiteral("%1: every value drawn must be in %2 (this one can give %3 to %4%5)")
                  .arg(at, rangeText(tunable))
                  .arg(lo)
                  .arg(hi)
                  .arg(quantized(k) ? QStringLiteral(", after rounding to q") : QString());
    if (name == QLatin1String("warmupEpochs") && hi > settings.trialEpochs)
        *p << QStringLiteral("%1.high: a warm-up of %2 epochs is longer than a trial (%3 epochs)")
                  .arg(at)
                  .arg(hi)
                  .arg(settings.trialEpochs);
}

void checkDistribution(
    const QString &name, const v1::Distribution &d, const TuneSettings &settings, QStringList *p)
{
    const QString at = QStringLiteral("tune.space.%1").arg(name);
    const Tunable *t = findTunable(name);
    if (!t) {
        *p << QStringLiteral("%1: not a hyperparameter a tune can search (one of %2)")
                  .arg(at, tunableNames().join(QLatin1String(", ")));
        return;
    }
    static const QStringList kinds { QStringLiteral("choice"), QStringLiteral("uniform"),
        QStringLiteral("loguniform"), QStringLiteral("randint"), QStringLiteral("quniform"),
        QStringLiteral("qloguniform"), QStringLiteral("qrandint") };
    const std::string &k = d.kind();
    if (!kinds.contains(str(k))) {
        *p << QStringLiteral("%1.kind: must be one of %2 (got \"%3\")")
                  .arg(at, kinds.join(QLatin1String(", ")), str(k));
        return;
    }
    if (k == "choice")
        checkChoice(at, *t, d, p);
    else
        checkRange(at, name, *t, d, settings, p);
}

} // namespace

QStringList tunableNames()
{
    QStringList names;
    for (const auto &t : tunables())
        names << QLatin1String(t.name);
    return names;
}

TuneSettings tuneSettings(const v1::StudyPlan &plan)
{
    const auto &t = plan.tune();
    TuneSettings s;
    if (!t.metric().empty())
        s.metric = str(t.metric());
    s.maximize = t.mode().empty() ? s.metric == QLatin1String("test_accuracy") : t.mode() == "max";
    const auto &sc = t.scheduler();
    if (!sc.kind().empty())
        s.scheduler = str(sc.kind());
    if (!sc.variant().empty())
        s.variant = str(sc.variant());
    if (sc.grace_period() > 0)
        s.gracePeriod = sc.grace_period();
    if (sc.reduction_factor() != 0)
        s.reductionFactor = sc.reduction_factor();
    if (sc.brackets() > 0)
        s.brackets = sc.brackets();
    if (s.asha())
        s.trialEpochs = sc.max_epochs() > 0 ? sc.max_epochs() : 9;
    else
        s.trialEpochs = t.epochs() > 0 ? t.epochs() : std::max(1, plan.training().epochs());
    s.workers = t.workers() > 0 ? t.workers() : 1;
    s.maxConcurrent = std::max(0, t.max_concurrent_trials());
    if (!t.searcher().empty())
        s.searcher = str(t.searcher());
    s.samples = t.samples() > 0 ? t.samples() : 1;
    s.seed = t.seed() != 0 ? t.seed() : 1;
    return s;
}

namespace {

// What a tune leaves out: its runs are its trials, drawn from tune.space.
void checkTuneLeavesOut(const v1::StudyPlan &plan, QStringList *p)
{
    const auto &g = plan.grid();
    if (g.workers_size() + g.batch_size_size() + g.epochs_size() + g.gpus_per_worker_size()
            + g.threads_per_worker_size() + g.precision_size() + g.lr_rule_size() + g.model_size()
            + g.accumulation_steps_size() + g.worker_ranges_size()
        > 0)
        *p << QStringLiteral("grid: a tune's runs are its trials, drawn from tune.space: leave grid out");
    const auto &b = plan.baseline();
    if (b.batch_size() != 0 || b.epochs() != 0 || b.gpus_per_worker() != 0 || b.threads_per_worker() != 0
        || !b.precision().empty() || !b.model().empty())
        *p << QStringLiteral("baseline: a tune has no baseline run: leave baseline out");
    if (plan.repeats() > 1)
        *p << QStringLiteral("repeats: a tune draws `tune.samples` trials instead of repeating runs (got %1)")
                  .arg(plan.repeats());
    if (plan.learning_rate_auto())
        *p << QStringLiteral(
            "training.learningRate: \"auto\" is not for a tune: search learningRate in tune.space instead");
}

// The tune's metric, its searcher and the size of each trial.
void checkTuneSearch(const v1::StudyPlan &plan, const TuneSettings &s, QStringList *p)
{
    const auto &t = plan.tune();
    const QStringList metrics { QStringLiteral("test_accuracy"), QStringLiteral("test_loss"),
        QStringLiteral("train_loss") };
    if (!metrics.contains(s.metric))
        *p << QStringLiteral("tune.metric: must be one of %1 (got \"%2\")")
                  .arg(metrics.join(QLatin1String(", ")), s.metric);
    if (!t.mode().empty() && t.mode() != "max" && t.mode() != "min")
        *p << QStringLiteral("tune.mode: must be \"max\" or \"min\" (got \"%1\")").arg(str(t.mode()));
    if (s.searcher != QLatin1String("random") && s.searcher != QLatin1String("grid"))
        *p << QStringLiteral("tune.searcher: must be \"random\" or \"grid\" (got \"%1\")").arg(s.searcher);
    if (t.samples() < 0 || t.samples() > 10000)
        *p << QStringLiteral("tune.samples: must be between 1 and 10000, or unset for 1 (got %1)")
                  .arg(t.samples());
    if (t.max_concurrent_trials() < 0)
        *p << QStringLiteral("tune.maxConcurrentTrials: must be 0 (as many as fit) or more (got %1)")
                  .arg(t.max_concurrent_trials());
    if (t.workers() < 0 || t.workers() > rules::kMaxWorkers)
        *p << QStringLiteral("tune.workers: must be between 1 and %1, or unset for 1 (got %2)")
                  .arg(rules::kMaxWorkers)
                  .arg(t.workers());
    if (t.epochs() < 0 || t.epochs() > rules::kMaxEpochs)
        *p << QStringLiteral("tune.epochs: must be between 1 and %1, or unset (got %2)")
                  .arg(rules::kMaxEpochs)
                  .arg(t.epochs());
}

// tune.scheduler; ASHA's brackets only once all else is valid, as they are computed from it.
void checkTuneScheduler(const v1::StudyPlan &plan, const TuneSettings &s, QStringList *p)
{
    const auto &t = plan.tune();
    const auto &sc = t.scheduler();
    if (s.scheduler != QLatin1String("none") && s.scheduler != QLatin1String("asha"))
        *p << QStringLiteral("tune.scheduler.kind: must be \"none\" or \"asha\" (got \"%1\")")
                  .arg(s.scheduler);
    if (s.variant != QLatin1String("stopping") && s.variant != QLatin1String("promotion"))
        *p << QStringLiteral(
            "tune.scheduler.variant: must be \"stopping\" (Ray's ASHAScheduler) or \"promotion\" "
            "(paused trials resume when in the top 1/η) (got \"%1\")")
                  .arg(s.variant);
    if (!s.asha()
        && (sc.grace_period() != 0 || sc.reduction_factor() != 0 || sc.max_epochs() != 0
            || sc.brackets() != 0))
        *p << QStringLiteral(
            "tune.scheduler: gracePeriod, reductionFactor, maxEpochs and brackets are for kind \"asha\"");
    if (s.asha() && t.epochs() != 0)
        *p << QStringLiteral(
            "tune.epochs: with ASHA, trials train at most tune.scheduler.maxEpochs: leave tune.epochs out");
    if (sc.grace_period() < 0)
        *p << QStringLiteral("tune.scheduler.gracePeriod: must be 1 or more (got %1)").arg(sc.grace_period());
    if (!(s.reductionFactor > 1) || !(s.reductionFactor <= 100))
        *p << QStringLiteral("tune.scheduler.reductionFactor: must be above 1 and at most 100 (got %1)")
                  .arg(s.reductionFactor);
    if (sc.max_epochs() < 0 || sc.max_epochs() > rules::kMaxEpochs)
        *p << QStringLiteral("tune.scheduler.maxEpochs: must be between 1 and %1 (got %2)")
                  .arg(rules::kMaxEpochs)
                  .arg(sc.max_epochs());
    if (s.asha() && s.gracePeriod > s.trialEpochs)
        *p << QStringLiteral("tune.scheduler.gracePeriod: %1 is more than maxEpochs (%2)")
                  .arg(s.gracePeriod)
                  .arg(s.trialEpochs);
    if (sc.brackets() < 0)
        *p << QStringLiteral("tune.scheduler.brackets: must be 1 or more (got %1)").arg(sc.brackets());
    if (s.promotion() && s.brackets > 1)
        *p << QStringLiteral("tune.scheduler.brackets: the promotion variant has one bracket (got %1)")
                  .arg(s.brackets);
    if (s.asha() && p->isEmpty()) {
        for (int bracket = 0; bracket < s.brackets; ++bracket)
            if (asha::milestones(s.gracePeriod, s.trialEpochs, s.reductionFactor, bracket).empty()) {
                *p << QStringLiteral(
                    "tune.scheduler.brackets: bracket %1 would have no rung (grace %2 · η^%1 is past "
                    "maxEpochs %3); use at most %1 bracket(s)")
                          .arg(bracket)
                          .arg(s.gracePeriod)
                          .arg(s.trialEpochs);
                break;
            }
    }
}

} // namespace

CheckStatus checkTune(const v1::StudyPlan &plan)
{
    QStringList p;
    const auto &t = plan.tune();
    const TuneSettings s = tuneSettings(plan);
    checkTuneLeavesOut(plan, &p);
    checkTuneSearch(plan, s, &p);
    checkTuneScheduler(plan, s, &p);

    int choices = 0;
    for (const auto &[name, distribution] : t.space()) {
        checkDistribution(str(name), distribution, s, &p);
        choices += distribution.kind() == "choice" ? 1 : 0;
    }
    if (s.searcher == QLatin1String("grid") && choices == 0)
        p << QStringLiteral(
            "tune.searcher: \"grid\" walks the \"choice\" dimensions of tune.space, and it has none");
    const auto &training = plan.training();
    if (training.has_warmup_epochs() && training.warmup_epochs() > s.trialEpochs)
        p << QStringLiteral("training.warmupEpochs: %1 is longer than a trial (%2 epochs)")
                 .arg(training.warmup_epochs())
                 .arg(s.trialEpochs);
    if (plan.has_tune() && drawTrialsCount(plan) > 10000)
        p << QStringLiteral("tune.samples: the grid times samples is %1 trials; at most 10000")
                 .arg(drawTrialsCount(plan));
    return p.isEmpty() ? CheckStatus::success() : CheckStatus::failure(p);
}

bool drawnInLogSpace(const v1::StudyPlan &plan, const QString &name)
{
    const auto &space = plan.tune().space();
    const auto it = space.find(name.toStdString());
    return it != space.end() && (it->second.kind() == "loguniform" || it->second.kind() == "qloguniform");
}

namespace {

// The "choice" dimensions of the grid, in drawing order, and their number of points.
QStringList gridDimensions(const v1::StudyPlan &plan, qint64 *points)
{
    QStringList dims;
    *points = 1;
    for (const QString &name : tunableNames()) {
        const auto it = plan.tune().space().find(name.toStdString());
        if (it != plan.tune().space().end() && it->second.kind() == "choice") {
            dims << name;
            *points *= std::max(1, it->second.values_size());
        }
    }
    return dims;
}

} // namespace

qint64 drawTrialsCount(const v1::StudyPlan &plan)
{
    const TuneSettings s = tuneSettings(plan);
    if (s.searcher != QLatin1String("grid"))
        return s.samples;
    qint64 points = 1;
    gridDimensions(plan, &points);
    return points * s.samples;
}

QList<TrialDraw> drawTrials(const v1::StudyPlan &plan)
{
    const TuneSettings s = tuneSettings(plan);
    const auto &space = plan.tune().space();
    qint64 points = 1;
    const QStringList grid
        = s.searcher == QLatin1String("grid") ? gridDimensions(plan, &points) : QStringList {};
    const qint64 count = drawTrialsCount(plan);

    // ASHA stopping with brackets: Ray's softmax over the brackets' rung counts.
    std::vector<double> bracketWeights;
    if (s.asha() && !s.promotion() && s.brackets > 1) {
        double most = 0;
        for (int b = 0; b < s.brackets; ++b)
            most = std::max(
                most, double(asha::milestones(s.gracePeriod, s.trialEpochs, s.reductionFactor, b).size()));
        double total = 0;
        for (int b = 0; b < s.brackets; ++b) {
            const double size
                = double(asha::milestones(s.gracePeriod, s.trialEpochs, s.reductionFactor, b).size());
            bracketWeights.push_back(std::exp(size - most));
            total += bracketWeights.back();
        }
        for (double &w : bracketWeights)
            w /= total;
    }

    QList<TrialDraw> trials;
    for (qint64 i = 0; i < count; ++i) {
        Stream stream(s.seed, quint64(i));
        TrialDraw trial;
        // The grid point of trial i: the last dimension varies fastest.
        qint64 rest = i % points;
        QMap<QString, int> gridIndex;
        for (qsizetype d = grid.size() - 1; d >= 0; --d) {
            const int n = std::max(1, space.at(grid[d].toStdString()).values_size());
            gridIndex[grid[d]] = int(rest % n);
            rest /= n;
        }
        for (const QString &name : tunableNames()) {
            const auto it = space.find(name.toStdString());
            if (it == space.end())
                continue;
            const double u = stream.unit(); // drawn for every dimension, so each keeps its stream
            if (gridIndex.contains(name)) {
                const int n = it->second.values_size();
                trial.params.insert(name, drawValue(it->second, (gridIndex[name] + 0.5) / n));
            } else {
                trial.params.insert(name, drawValue(it->second, u));
            }
        }
        if (!bracketWeights.empty()) {
            double u = stream.unit(), sum = 0;
            trial.bracket = int(bracketWeights.size()) - 1;
            for (int b = 0; b < int(bracketWeights.size()); ++b) {
                sum += bracketWeights[std::size_t(b)];
                if (u < sum) {
                    trial.bracket = b;
                    break;
                }
            }
        }
        trials << trial;
    }
    return trials;
}

QList<int> trialTargets(const TuneSettings &settings, int bracket)
{
    QList<int> targets;
    if (settings.asha())
        for (double m : asha::milestones(settings.gracePeriod, settings.trialEpochs, settings.reductionFactor,
                 settings.promotion() ? 0 : bracket)) {
            const int epoch = int(std::ceil(m - 1e-9));
            if (epoch < settings.trialEpochs && (targets.isEmpty() || targets.last() < epoch))
                targets << epoch;
        }
    targets << settings.trialEpochs;
    return targets;
}

RunConfig trialConfig(const v1::StudyPlan &plan, const QJsonObject &params)
{
    const TuneSettings s = tuneSettings(plan);
    const auto &t = plan.training();
    RunConfig c;
    c.workers = s.workers;
    c.batchSize = params.contains(QLatin1String("batchSize"))
        ? params.value(QLatin1String("batchSize")).toInt()
        : (t.batch_size() > 0 ? t.batch_size() : 64);
    c.epochs = s.trialEpochs;
    c.gpusPerWorker = t.gpus_per_worker();
    c.threadsPerWorker = t.threads_per_worker();
    c.precision = params.contains(QLatin1String("precision"))
        ? params.value(QLatin1String("precision")).toString()
        : (t.precision() == v1::BF16 ? QStringLiteral("bf16") : QStringLiteral("fp32"));
    c.lrRule = t.lr_scaling().empty() ? QStringLiteral("none") : str(t.lr_scaling());
    c.accumulationSteps = std::max(1, t.accumulation_steps());
    c.model = params.contains(QLatin1String("model")) ? params.value(QLatin1String("model")).toString()
        : t.model().empty()                           ? QString::fromLatin1(kDefaultModelName)
                                                      : str(t.model());
    return c;
}

void applyTrialParams(const QJsonObject &params, v1::RunSpec *spec)
{
    const auto number = [&](const char *name) { return params.value(QLatin1String(name)).toDouble(); };
    const auto has = [&](const char *name) { return params.contains(QLatin1String(name)); };
    if (has("learningRate"))
        spec->set_learning_rate(number("learningRate"));
    if (has("momentum"))
        spec->set_momentum(number("momentum"));
    if (has("weightDecay"))
        spec->set_weight_decay(number("weightDecay"));
    if (has("blockDropout"))
        spec->set_block_dropout(number("blockDropout"));
    if (has("denseDropout"))
        spec->set_dense_dropout(number("denseDropout"));
    if (has("labelSmoothing"))
        spec->set_label_smoothing(number("labelSmoothing"));
    if (has("warmupEpochs"))
        spec->set_warmup_epochs(number("warmupEpochs"));
    // batchSize, precision and model are the run's configuration (trialConfig).
}

QString paramLabel(const QString &name)
{
    const Tunable *t = findTunable(name);
    return t ? QLatin1String(t->label) : name;
}

QString paramsText(const QJsonObject &params)
{
    QStringList parts;
    for (const QString &name : tunableNames()) {
        if (!params.contains(name))
            continue;
        const QJsonValue v = params.value(name);
        parts << QStringLiteral("%1 %2").arg(
            paramLabel(name), v.isString() ? v.toString() : QString::number(v.toDouble(), 'g', 3));
    }
    return parts.join(QStringLiteral(" · "));
}

v1::StudyPlan exampleTunePlan(const QString &dataset)
{
    v1::StudyPlan plan;
    plan.set_name("example-tune");
    plan.set_dataset(dataset.toStdString());
    plan.mutable_baseline()->set_skip(true);
    plan.mutable_training()->set_max_train_images(2000);
    plan.mutable_training()->set_max_test_images(500);
    plan.set_max_failures(2);
    auto *t = plan.mutable_tune();
    auto &space = *t->mutable_space();
    auto &lr = space["learningRate"];
    lr.set_kind("loguniform");
    lr.set_low(0.003);
    lr.set_high(0.3);
    auto &momentum = space["momentum"];
    momentum.set_kind("uniform");
    momentum.set_low(0.5);
    momentum.set_high(0.95);
    auto &dropout = space["denseDropout"];
    dropout.set_kind("quniform");
    dropout.set_low(0.1);
    dropout.set_high(0.6);
    dropout.set_q(0.05);
    auto &batch = space["batchSize"];
    batch.set_kind("choice");
    batch.add_values()->set_number_value(32);
    batch.add_values()->set_number_value(64);
    t->set_samples(9);
    t->set_seed(7);
    t->set_max_concurrent_trials(2);
    t->set_metric("test_accuracy");
    t->set_mode("max");
    auto *scheduler = t->mutable_scheduler();
    scheduler->set_kind("asha");
    scheduler->set_variant("stopping");
    scheduler->set_grace_period(1);
    scheduler->set_reduction_factor(3);
    scheduler->set_max_epochs(9);
    return plan;
}

} // namespace scalelab::core
