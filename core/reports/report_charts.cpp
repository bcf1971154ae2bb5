#include "report_charts.h"

#include "downsample.h"

#include <QBuffer>
#include <QFont>
#include <QFontMetricsF>
#include <QHash>
#include <QPainter>
#include <QPainterPath>
#include <QSvgGenerator>

#include <algorithm>
#include <cmath>
#include <vector>

namespace scalelab::core {

namespace {

// Okabe–Ito: distinguishable with colour-blindness and in greyscale print (yellow left out).
const QList<QColor> &palette()
{
    static const QList<QColor> colors { QColor(0x00, 0x72, 0xB2), QColor(0xD5, 0x5E, 0x00),
        QColor(0x00, 0x9E, 0x73), QColor(0xCC, 0x79, 0xA7), QColor(0xE6, 0x9F, 0x00),
        QColor(0x56, 0xB4, 0xE9), QColor(0x33, 0x33, 0x33) };
    return colors;
}

const QColor kIdealColor(0x88, 0x88, 0x88);
const QColor kTargetColor(0xB0, 0x30, 0x30);
const QColor kAxisColor(0x44, 0x44, 0x44);
const QColor kGridColor(0xE4, 0xE4, 0xE4);
const QColor kTextColor(0x22, 0x22, 0x22);
// Step curves are thinned to what a chart's width can show.
constexpr int kMaxPointsPerCurve = 400;
// Room kept between a reference line and the plot's frame, as a fraction of the y span.
constexpr double kReferenceMargin = 0.08;

QFont chartFont(qreal pixelSize, bool bold = false)
{
    QFont font(QStringLiteral("DejaVu Sans"));
    font.setStyleHint(QFont::SansSerif);
    font.setPixelSize(std::max(1, qRound(pixelSize)));
    font.setBold(bold);
    return font;
}

bool finite(QPointF p)
{
    return std::isfinite(p.x()) && std::isfinite(p.y());
}

// A value axis: the range it spans and where its ticks sit.
struct Axis {
    double lo = 0;
    double hi = 1;
    QList<double> ticks;
    int decimals = 0;

    double map(double v, double from, double to) const { return from + (v - lo) / (hi - lo) * (to - from); }
};

// 1, 2 or 5 times a power of ten, about range / wanted.
double niceStep(double range, int wanted)
{
    const double raw = range / std::max(1, wanted);
    const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
    const double fraction = raw / magnitude;
    const double nice = fraction < 1.5 ? 1 : fraction < 3 ? 2 : fraction < 7 ? 5 : 10;
    return nice * magnitude;
}

Axis makeAxis(double min, double max, bool integers, bool percent)
{
    if (!std::isfinite(min) || !std::isfinite(max)) {
        min = 0;
        max = 1;
    }
    if (max - min < 1e-12) {
        const double pad = integers ? 1.0 : std::max(std::abs(min) * 0.1, percent ? 0.05 : 1.0);
        min -= pad;
        max += pad;
    }
    Axis axis;
    double step = niceStep(max - min, 5);
    if (integers) {
        step = std::max(1.0, std::ceil(step));
        // Whole-number axes (workers, epochs) keep a margin so end points are not on the frame.
        axis.lo = std::floor(min) - 0.25 * step;
        axis.hi = std::ceil(max) + 0.25 * step;
        for (double t = std::ceil(min / step) * step; t <= max + 1e-9; t += step)
            axis.ticks.append(t);
    } else {
        axis.lo = std::floor(min / step + 1e-9) * step;
        axis.hi = std::ceil(max / step - 1e-9) * step;
        for (double t = axis.lo; t <= axis.hi + step * 1e-6; t += step)
            axis.ticks.append(std::abs(t) < step * 1e-9 ? 0.0 : t);
    }
    const double shownStep = percent ? step * 100 : step;
    axis.decimals = shownStep >= 1 ? 0 : int(std::ceil(-std::log10(shownStep) - 1e-9));
    return axis;
}

QString tickText(double v, const Axis &axis, bool percent)
{
    if (percent)
        return QString::number(v * 100, 'f', axis.decimals) + QLatin1Char('%');
    return QString::number(v, 'f', axis.decimals);
}

struct LegendEntry {
    QString name;
    const ChartSeries *series;
};

QList<LegendEntry> legendEntries(const ChartSpec &chart)
{
    QList<LegendEntry> entries;
    for (const ChartSeries &s : chart.series) {
        if (s.name.isEmpty())
            continue;
        const bool listed = std::any_of(
            entries.cbegin(), entries.cend(), [&](const LegendEntry &e) { return e.name == s.name; });
        if (!listed)
            entries.append({ s.name, &s });
    }
    return entries;
}

void drawMarker(QPainter &p, QPointF at, const QColor &color, qreal u)
{
    p.setPen(QPen(Qt::white, 0.8 * u));
    p.setBrush(color);
    p.drawEllipse(at, 3.0 * u, 3.0 * u);
}

void drawSwatch(QPainter &p, const ChartSeries &s, const QRectF &box, qreal u)
{
    const qreal y = box.center().y();
    if (s.line) {
        QPen pen(s.color, std::max(s.width, 1.5) * u, s.style, Qt::FlatCap);
        p.setPen(pen);
        p.drawLine(QPointF(box.left(), y), QPointF(box.right(), y));
    }
    if (s.markers)
        drawMarker(p, QPointF(box.center().x(), y), s.color, u);
}

} // namespace

void paintChart(QPainter &p, const QRectF &rect, const ChartSpec &chart, qreal u)
{
    p.save();
    p.setRenderHint(QPainter::Antialiasing);
    p.setPen(Qt::NoPen);
    p.setBrush(Qt::white);
    p.drawRect(rect);

    const QFont titleFont = chartFont(13 * u, true);
    const QFont labelFont = chartFont(11 * u);
    const QFont tickFont = chartFont(10 * u);
    const QFont legendFont = chartFont(10.5 * u);
    const QFontMetricsF titleFm(titleFont, p.device()), labelFm(labelFont, p.device()),
        tickFm(tickFont, p.device()), legendFm(legendFont, p.device());
    const qreal pad = 8 * u;

    // Ranges over everything that is drawn.
    double xMin = INFINITY, xMax = -INFINITY, yMin = INFINITY, yMax = -INFINITY;
    bool any = false;
    const auto include = [&](QPointF pt) {
        if (!finite(pt))
            return;
        any = true;
        xMin = std::min(xMin, pt.x());
        xMax = std::max(xMax, pt.x());
        yMin = std::min(yMin, pt.y());
        yMax = std::max(yMax, pt.y());
    };
    for (const ChartSeries &s : chart.series) {
        for (int i = 0; i < s.points.size(); ++i) {
            include(s.points[i]);
            if (i < s.errorBars.size() && finite(s.points[i])) {
                include({ s.points[i].x(), s.errorBars[i].x() });
                include({ s.points[i].x(), s.errorBars[i].y() });
            }
        }
    }
    if (any) {
        // A reference line (the target accuracy) below or above every point would sit on the
        // frame, where the x axis hides it: keep a margin on both sides of it, never crossing
        // zero (or 100% on a percent axis) that the line itself does not cross.
        double refMin = INFINITY, refMax = -INFINITY;
        for (const ChartReferenceLine &r : chart.referenceLines) {
            refMin = std::min(refMin, r.y);
            refMax = std::max(refMax, r.y);
        }
        if (std::isfinite(refMin)) {
            const double margin = kReferenceMargin * (std::max(yMax, refMax) - std::min(yMin, refMin));
            double below = refMin - margin, above = refMax + margin;
            if (refMin >= 0 && yMin >= 0)
                below = std::max(below, 0.0);
            if (chart.yPercent && refMax <= 1 && yMax <= 1)
                above = std::min(above, 1.0);
            yMin = std::min(yMin, below);
            yMax = std::max(yMax, above);
        }
        if (chart.yFloor)
            yMin = std::min(yMin, *chart.yFloor);
        if (chart.yCeiling)
            yMax = std::max(yMax, *chart.yCeiling);
    }
    const Axis xAxis = makeAxis(any ? xMin : 0, any ? xMax : 1, chart.xIntegerTicks, false);
    const Axis yAxis = makeAxis(any ? yMin : 0, any ? yMax : 1, false, chart.yPercent);

    // Legend rows, laid out first because they take height from the plot.
    const QList<LegendEntry> legend = legendEntries(chart);
    const qreal swatchW = 22 * u, gap = 14 * u, rowH = legendFm.height() + 4 * u;
    const qreal legendWidth = rect.width() - 2 * pad;
    QList<QPair<QPointF, const LegendEntry *>> legendSlots; // top-left relative to the legend box
    qreal lx = 0, ly = 0;
    for (const LegendEntry &e : legend) {
        const qreal w = swatchW + 5 * u + legendFm.horizontalAdvance(e.name);
        if (lx > 0 && lx + w > legendWidth) {
            lx = 0;
            ly += rowH;
        }
        legendSlots.append({ QPointF(lx, ly), &e });
        lx += w + gap;
    }
    const qreal legendH = legend.isEmpty() ? 0 : ly + rowH;

    qreal yTickW = 0;
    for (double t : yAxis.ticks)
        yTickW = std::max(yTickW, tickFm.horizontalAdvance(tickText(t, yAxis, chart.yPercent)));
    const qreal lastXTickW
        = xAxis.ticks.isEmpty() ? 0 : tickFm.horizontalAdvance(tickText(xAxis.ticks.last(), xAxis, false));
    const QRectF plot(QPointF(rect.left() + pad + labelFm.height() + 8 * u + yTickW + 6 * u,
                          rect.top() + pad + titleFm.height() + 10 * u),
        QPointF(rect.right() - pad - std::max(lastXTickW / 2, 4 * u),
            rect.bottom() - pad - legendH - (legendH > 0 ? 8 * u : 0) - labelFm.height() - tickFm.height()
                - 10 * u));
    const auto px = [&](double x) { return xAxis.map(x, plot.left(), plot.right()); };
    const auto py = [&](double y) { return yAxis.map(y, plot.bottom(), plot.top()); };

    // Title.
    p.setPen(kTextColor);
    p.setFont(titleFont);
    p.drawText(QRectF(rect.left() + pad, rect.top() + pad, rect.width() - 2 * pad, titleFm.height()),
        Qt::AlignLeft | Qt::AlignVCenter, chart.title);

    // Grid, ticks and tick labels.
    p.setFont(tickFont);
    for (double t : yAxis.ticks) {
        const qreal y = py(t);
        p.setPen(QPen(kGridColor, 0.8 * u));
        p.drawLine(QPointF(plot.left(), y), QPointF(plot.right(), y));
        p.setPen(QPen(kAxisColor, 0.8 * u));
        p.drawLine(QPointF(plot.left() - 4 * u, y), QPointF(plot.left(), y));
        p.setPen(kTextColor);
        p.drawText(QRectF(plot.left() - 6 * u - yTickW, y - tickFm.height() / 2, yTickW, tickFm.height()),
            Qt::AlignRight | Qt::AlignVCenter, tickText(t, yAxis, chart.yPercent));
    }
    for (double t : xAxis.ticks) {
        const qreal x = px(t);
        p.setPen(QPen(kAxisColor, 0.8 * u));
        p.drawLine(QPointF(x, plot.bottom()), QPointF(x, plot.bottom() + 4 * u));
        p.setPen(kTextColor);
        const QString text = tickText(t, xAxis, false);
        const qreal w = tickFm.horizontalAdvance(text) + 2 * u;
        p.drawText(QRectF(x - w / 2, plot.bottom() + 5 * u, w, tickFm.height()), Qt::AlignCenter, text);
    }
    p.setPen(QPen(kAxisColor, 1.0 * u));
    p.drawLine(plot.bottomLeft(), plot.bottomRight());
    p.drawLine(plot.bottomLeft(), plot.topLeft());

    // Axis labels.
    p.setFont(labelFont);
    p.setPen(kTextColor);
    p.drawText(
        QRectF(plot.left(), plot.bottom() + 6 * u + tickFm.height(), plot.width(), labelFm.height() + 2 * u),
        Qt::AlignCenter, chart.xLabel);
    p.save();
    p.translate(rect.left() + pad, plot.center().y());
    p.rotate(-90);
    p.drawText(QRectF(-plot.height() / 2, 0, plot.height(), labelFm.height()), Qt::AlignCenter, chart.yLabel);
    p.restore();

    if (!any) {
        p.setPen(QColor(0x77, 0x77, 0x77));
        p.drawText(plot, Qt::AlignCenter, chart.emptyText);
    }

    // Reference lines under the data.
    for (const ChartReferenceLine &r : chart.referenceLines) {
        if (!any)
            break;
        const qreal y = py(r.y);
        p.setPen(QPen(r.color, 1.0 * u, Qt::DashLine, Qt::FlatCap));
        p.drawLine(QPointF(plot.left(), y), QPointF(plot.right(), y));
        p.setFont(tickFont);
        p.setPen(r.color);
        p.drawText(QRectF(plot.left(), y - tickFm.height() - 1 * u, plot.width() - 4 * u, tickFm.height()),
            Qt::AlignRight | Qt::AlignBottom, r.label);
    }

    // Series: error bars, then lines, then markers on top.
    for (const ChartSeries &s : chart.series) {
        p.setBrush(Qt::NoBrush);
        p.setPen(QPen(s.color, 1.0 * u));
        for (int i = 0; i < s.points.size() && i < s.errorBars.size(); ++i) {
            const QPointF bar = s.errorBars[i];
            if (!finite(s.points[i]) || !finite(bar))
                continue;
            const qreal x = px(s.points[i].x());
            p.drawLine(QPointF(x, py(bar.x())), QPointF(x, py(bar.y())));
            p.drawLine(QPointF(x - 3 * u, py(bar.x())), QPointF(x + 3 * u, py(bar.x())));
            p.drawLine(QPointF(x - 3 * u, py(bar.y())), QPointF(x + 3 * u, py(bar.y())));
        }
        if (s.line) {
            QPainterPath path;
            bool open = false;
            for (const QPointF &pt : s.points) {
                if (!finite(pt)) {
                    open = false; // a gap in the measurements is a gap in the line
                    continue;
                }
                const QPointF at(px(pt.x()), py(pt.y()));
                if (open)
                    path.lineTo(at);
                else
                    path.moveTo(at);
                open = true;
            }
            p.setPen(QPen(s.color, s.width * u, s.style, Qt::RoundCap, Qt::RoundJoin));
            p.drawPath(path);
        }
    }
    for (const ChartSeries &s : chart.series) {
        if (!s.markers)
            continue;
        for (const QPointF &pt : s.points) {
            if (finite(pt))
                drawMarker(p, QPointF(px(pt.x()), py(pt.y())), s.color, u);
        }
    }

    // Legend.
    p.setFont(legendFont);
    const QPointF legendOrigin(rect.left() + pad, rect.bottom() - pad - legendH);
    for (const auto &[offset, entry] : std::as_const(legendSlots)) {
        const QPointF at = legendOrigin + offset;
        drawSwatch(p, *entry->series, QRectF(at.x(), at.y(), swatchW, rowH), u);
        p.setPen(kTextColor);
        p.drawText(QRectF(at.x() + swatchW + 5 * u, at.y(), legendWidth, rowH),
            Qt::AlignLeft | Qt::AlignVCenter, entry->name);
    }
    p.restore();
}

QByteArray chartSvg(const ChartSpec &chart, const QSizeF &size)
{
    QBuffer buffer;
    buffer.open(QIODevice::WriteOnly);
    QSvgGenerator generator;
    generator.setOutputDevice(&buffer);
    generator.setSize(size.toSize());
    generator.setViewBox(QRectF(QPointF(0, 0), size));
    generator.setTitle(chart.title);
    {
        QPainter painter(&generator);
        paintChart(painter, QRectF(QPointF(0, 0), size), chart);
    }
    const QByteArray svg = buffer.data();
    const qsizetype start = svg.indexOf("<svg");
    return start >= 0 ? svg.mid(start) : svg;
}

// ---- The study's charts -------------------------------------------------------------------

namespace {

// The axes of a configuration other than workers, each as (varies?, text).
QStringList variantParts(const RunConfig &c, const QList<ConfigResult> &configs)
{
    const auto varies = [&](auto field) {
        return std::any_of(configs.cbegin(), configs.cend(),
            [&](const ConfigResult &o) { return field(o.config) != field(c); });
    };
    QStringList parts;
    if (varies([](const RunConfig &x) { return x.batchSize; }))
        parts << QStringLiteral("batch %1").arg(c.batchSize);
    if (varies([](const RunConfig &x) { return x.epochs; }))
        parts << QStringLiteral("%1 epochs").arg(c.epochs);
    if (varies([](const RunConfig &x) { return x.gpusPerWorker; }))
        parts << (c.gpusPerWorker > 0 ? QStringLiteral("%1 GPU/worker").arg(c.gpusPerWorker)
                                      : QStringLiteral("CPU"));
    if (varies([](const RunConfig &x) { return x.threadsPerWorker; }))
        parts << (c.threadsPerWorker > 0 ? QStringLiteral("%1 threads").arg(c.threadsPerWorker)
                                         : QStringLiteral("auto threads"));
    if (varies([](const RunConfig &x) { return x.precision; }))
        parts << c.precision;
    if (varies([](const RunConfig &x) { return x.lrRule; }))
        parts << QStringLiteral("LR %1").arg(c.lrRule);
    return parts;
}

QString variantKey(RunConfig c)
{
    c.workers = 1;
    c.baseline = false;
    return c.key();
}

// Curves of every run, one colour per configuration.
struct CurveSet {
    const StudySnapshot &snapshot;
    const StudyResults &results;

    QColor colorOf(const QString &key) const
    {
        for (int i = 0; i < results.configs.size(); ++i) {
            if (results.configs[i].key == key)
                return palette()[i % palette().size()];
        }
        return palette().last();
    }

    template <typename PointsOf> QList<ChartSeries> curves(PointsOf pointsOf, bool markers) const
    {
        QList<ChartSeries> out;
        for (const RunResult &run : snapshot.runs) {
            ChartSeries s;
            s.name = configLabel(run.config, results.configs);
            s.color = colorOf(run.config.key());
            s.points = pointsOf(run);
            s.markers = markers;
            s.width = 1.4;
            // A repeat is drawn dashed so it can be told apart from the first.
            s.style = run.repeat % 2 == 0 ? Qt::SolidLine : Qt::DashLine;
            if (!s.points.isEmpty())
                out.append(s);
        }
        return out;
    }
};

QList<QPointF> lossPoints(const RunResult &run)
{
    std::vector<QPointF> fromSteps;
    for (const StepPoint &s : run.steps) {
        if (std::isfinite(s.elapsedSeconds) && std::isfinite(s.loss))
            fromSteps.emplace_back(s.elapsedSeconds, s.loss);
    }
    if (!fromSteps.empty()) {
        if (fromSteps.size() <= size_t(kMaxPointsPerCurve))
            return QList<QPointF>(fromSteps.begin(), fromSteps.end());
        return minMaxDownsample(fromSteps, kMaxPointsPerCurve / 4);
    }
    QList<QPointF> fromEpochs;
    for (const EpochPoint &e : run.epochs)
        fromEpochs.append({ e.elapsedSeconds, e.trainLoss });
    return fromEpochs;
}

QString percentText(double fraction)
{
    return QStringLiteral("%1%").arg(fraction * 100, 0, 'f', 1);
}

} // namespace

QString configLabel(const RunConfig &config, const QList<ConfigResult> &configs)
{
    QString label
        = config.workers == 1 ? QStringLiteral("1 worker") : QStringLiteral("%1 workers").arg(config.workers);
    if (config.baseline)
        label += QStringLiteral(" (baseline)");
    const QStringList parts = variantParts(config, configs);
    return parts.isEmpty() ? label : label + QStringLiteral(" · ") + parts.join(QStringLiteral(" · "));
}

QList<ChartSpec> studyCharts(const StudySnapshot &snapshot, const StudyResults &results)
{
    const CurveSet curves { snapshot, results };
    const double target = results.targetAccuracy;
    QList<ChartReferenceLine> targetLine;
    if (std::isfinite(target))
        targetLine.append({ target, QStringLiteral("target %1").arg(percentText(target)), kTargetColor });

    QList<ChartSpec> charts;
    {
        ChartSpec c;
        c.title = QStringLiteral("Training loss");
        c.xLabel = QStringLiteral("Wall-clock since training start (s)");
        c.yLabel = QStringLiteral("Loss");
        c.series = curves.curves(lossPoints, false);
        c.yFloor = 0;
        charts.append(c);
    }
    // Test accuracy per epoch end, against the epoch number or against the wall-clock.
    const auto accuracyChart = [&](const QString &title, const QString &xLabel, bool byEpoch) {
        ChartSpec c;
        c.title = title;
        c.xLabel = xLabel;
        c.yLabel = QStringLiteral("Test accuracy");
        c.yPercent = true;
        c.xIntegerTicks = byEpoch;
        c.referenceLines = targetLine;
        c.series = curves.curves(
            [byEpoch](const RunResult &run) {
                QList<QPointF> pts;
                for (const EpochPoint &e : run.epochs)
                    pts.append({ byEpoch ? double(e.epoch) : e.elapsedSeconds, e.testAccuracy });
                return pts;
            },
            true);
        return c;
    };
    charts << accuracyChart(QStringLiteral("Test accuracy by epoch"), QStringLiteral("Epoch"), true)
           << accuracyChart(QStringLiteral("Test accuracy over time (time to accuracy)"),
                  QStringLiteral("Wall-clock since training start (s)"), false);

    // Versus workers: one series per variant (the configuration without its worker count).
    QStringList variants;
    for (const ConfigResult &c : results.configs) {
        if (!variants.contains(variantKey(c.config)))
            variants.append(variantKey(c.config));
    }
    const ConfigResult *base = results.baseline();
    const int baseWorkers = base ? std::max(1, base->config.workers) : 1;
    const auto seriesName = [&](const ConfigResult &first, const QString &what) {
        const QStringList parts = variantParts(first.config, results.configs);
        return parts.isEmpty() ? what : parts.join(QStringLiteral(" · ")) + QStringLiteral(" — ") + what;
    };
    const QString ttaName = std::isfinite(target) ? QStringLiteral("by time to %1").arg(percentText(target))
                                                  : QStringLiteral("by time to accuracy");

    ChartSpec throughput, speedup, efficiency;
    throughput.title = QStringLiteral("Throughput");
    throughput.yLabel = QStringLiteral("Images / second");
    speedup.title = QStringLiteral("Speedup over the baseline");
    speedup.yLabel = QStringLiteral("Speedup (×)");
    efficiency.title = QStringLiteral("Scaling efficiency");
    efficiency.yLabel = QStringLiteral("Efficiency");
    efficiency.yPercent = true;
    for (ChartSpec *c : { &throughput, &speedup, &efficiency }) {
        c->xLabel = QStringLiteral("Workers");
        c->xIntegerTicks = true;
        c->yFloor = 0;
    }
    const QString noBaseline
        = results.baselineNote.isEmpty() ? QStringLiteral("No speedup measured yet") : results.baselineNote;
    speedup.emptyText = noBaseline;
    efficiency.emptyText = noBaseline;

    int maxWorkers = baseWorkers;
    for (int v = 0; v < variants.size(); ++v) {
        const QColor color = palette()[v % palette().size()];
        ChartSeries rate, wall, tta;
        rate.color = wall.color = tta.color = color;
        rate.markers = wall.markers = tta.markers = true;
        tta.style = Qt::DashLine;
        const ConfigResult *first = nullptr;
        for (const ConfigResult &c : results.configs) {
            if (variantKey(c.config) != variants[v])
                continue;
            first = first ? first : &c;
            const double w = c.config.workers;
            maxWorkers = std::max(maxWorkers, c.config.workers);
            rate.points.append({ w, c.imagesPerSecond.mean });
            rate.errorBars.append({ c.imagesPerSecond.min, c.imagesPerSecond.max });
            wall.points.append({ w, c.byWallClock.speedup });
            tta.points.append({ w, c.byTimeToAccuracy.speedup });
        }
        rate.name = seriesName(*first, QStringLiteral("mean, bars min–max"));
        wall.name = seriesName(*first, QStringLiteral("by wall-clock"));
        tta.name = seriesName(*first, ttaName);
        ChartSeries wallEff = wall, ttaEff = tta;
        for (int i = 0; i < wall.points.size(); ++i) {
            const double w = wall.points[i].x() / baseWorkers;
            wallEff.points[i].setY(wall.points[i].y() / w);
            ttaEff.points[i].setY(tta.points[i].y() / w);
        }
        throughput.series.append(rate);
        speedup.series << wall << tta;
        efficiency.series << wallEff << ttaEff;
    }

    // Ideal lines, from the baseline (only where there is one).
    if (base && !speedup.series.isEmpty()) {
        ChartSeries ideal;
        ideal.name = QStringLiteral("ideal (linear)");
        ideal.color = kIdealColor;
        ideal.style = Qt::DashDotLine;
        ideal.width = 1.2;
        ChartSeries idealRate = ideal, idealSpeedup = ideal, idealEff = ideal;
        for (const double w : { double(baseWorkers), double(maxWorkers) }) {
            idealRate.points.append({ w, base->imagesPerSecond.mean * w / baseWorkers });
            idealSpeedup.points.append({ w, w / baseWorkers });
            idealEff.points.append({ w, 1.0 });
        }
        // The ideal line is only drawn next to measured points, so a chart of nothing stays empty.
        const auto hasData = [](const ChartSpec &c) {
            return std::any_of(c.series.cbegin(), c.series.cend(),
                [](const ChartSeries &s) { return std::any_of(s.points.cbegin(), s.points.cend(), finite); });
        };
        if (hasData(throughput))
            throughput.series.prepend(idealRate);
        if (hasData(speedup))
            speedup.series.prepend(idealSpeedup);
        if (hasData(efficiency))
            efficiency.series.prepend(idealEff);
    }
    charts << throughput << speedup << efficiency;
    if (snapshot.learningRateCurve.size() > 1) {
        ChartSpec c;
        c.title = QStringLiteral("Learning-rate range test");
        c.xLabel = QStringLiteral("log10 of the learning rate");
        c.yLabel = QStringLiteral("Smoothed training loss");
        ChartSeries curve;
        curve.name = QStringLiteral("smoothed loss");
        curve.color = palette().first();
        for (const auto &[lr, loss] : snapshot.learningRateCurve)
            if (lr > 0)
                curve.points << QPointF(std::log10(lr), loss);
        c.series << curve;
        charts.append(c);
    }
    return charts;
}

} // namespace scalelab::core
