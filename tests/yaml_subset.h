// The block-style YAML the manifests of packaging/kubernetes are written in, read into
// QVariant (maps, lists, strings), for tests: `key: value`, nested blocks, `- ` lists
// (of scalars or of maps), quoted and plain scalars, `{}` and `[]`, `#` comments.
// Not flow collections, anchors, multi-line scalars or several documents per file.
#pragma once

#include <QString>
#include <QStringList>
#include <QVariant>

namespace scalelab::test {

class YamlSubset {
public:
    // The document in `text`; problems (a line it cannot read) in `error`.
    static QVariant parse(const QString &text, QString *error)
    {
        YamlSubset y;
        for (const QString &raw : text.split(QLatin1Char('\n'))) {
            QString line = raw;
            const qsizetype hash = line.indexOf(QLatin1String(" #"));
            if (line.trimmed().startsWith(QLatin1Char('#')))
                continue;
            if (hash >= 0 && line.left(hash).count(QLatin1Char('"')) % 2 == 0)
                line.truncate(hash);
            if (line.trimmed().isEmpty() || line.trimmed() == QLatin1String("---"))
                continue;
            qsizetype spaces = 0;
            while (spaces < line.size() && line[spaces] == QLatin1Char(' '))
                ++spaces;
            y.m_lines.append({ int(spaces), line.mid(spaces).trimmed() });
        }
        if (y.m_lines.isEmpty())
            return {};
        const QVariant root = y.block(y.m_lines.first().indent);
        if (y.m_at < y.m_lines.size() && y.m_error.isEmpty())
            y.m_error = QStringLiteral("cannot read '%1' (indentation?)").arg(y.m_lines[y.m_at].text);
        if (error)
            *error = y.m_error;
        return y.m_error.isEmpty() ? root : QVariant();
    }

    // The value at a path of keys and list indexes ("spec.template.spec.containers.0.args").
    static QVariant at(const QVariant &node, const QString &path)
    {
        QVariant v = node;
        for (const QString &part : path.split(QLatin1Char('.'))) {
            bool isIndex = false;
            const int index = part.toInt(&isIndex);
            if (isIndex && v.typeId() == QMetaType::QVariantList)
                v = v.toList().value(index);
            else if (v.typeId() == QMetaType::QVariantMap)
                v = v.toMap().value(part);
            else
                return {};
        }
        return v;
    }

private:
    struct Line {
        int indent;
        QString text;
    };
    QList<Line> m_lines;
    qsizetype m_at = 0;
    QString m_error;

    static QVariant scalar(QString text)
    {
        text = text.trimmed();
        if (text == QLatin1String("{}"))
            return QVariantMap();
        if (text == QLatin1String("[]"))
            return QVariantList();
        if (text.size() >= 2
            && ((text.startsWith(QLatin1Char('"')) && text.endsWith(QLatin1Char('"')))
                || (text.startsWith(QLatin1Char('\'')) && text.endsWith(QLatin1Char('\'')))))
            return text.mid(1, text.size() - 2);
        return text;
    }

    static bool isItem(const QString &text)
    {
        return text == QLatin1String("-") || text.startsWith(QLatin1String("- "));
    }

    QVariant block(int indent) { return isItem(m_lines[m_at].text) ? list(indent) : map(indent); }

    // The value after "key:" or "-" with nothing on the line: the more indented block below.
    QVariant nested(int indent)
    {
        if (m_at < m_lines.size() && m_lines[m_at].indent > indent)
            return block(m_lines[m_at].indent);
        return {};
    }

    QVariant list(int indent)
    {
        QVariantList items;
        while (m_error.isEmpty() && m_at < m_lines.size() && m_lines[m_at].indent == indent
            && isItem(m_lines[m_at].text)) {
            const QString rest = m_lines[m_at].text.mid(1).trimmed();
            if (rest.isEmpty()) {
                ++m_at;
                items.append(nested(indent));
            } else if (keyOf(rest) >= 0) {
                // "- key: value": a map whose keys sit where "key" does.
                m_lines[m_at] = { indent + 2, rest };
                items.append(map(indent + 2));
            } else {
                ++m_at;
                items.append(scalar(rest));
            }
        }
        return items;
    }

    // Where "key:" ends in `text`, or -1 when it is no "key: value" line.
    static qsizetype keyOf(const QString &text)
    {
        if (text.startsWith(QLatin1Char('"')) || text.startsWith(QLatin1Char('\'')))
            return -1;
        const qsizetype colon = text.indexOf(QLatin1Char(':'));
        if (colon <= 0)
            return -1;
        return colon + 1 == text.size() || text[colon + 1] == QLatin1Char(' ') ? colon : -1;
    }

    QVariant map(int indent)
    {
        QVariantMap entries;
        while (m_error.isEmpty() && m_at < m_lines.size() && m_lines[m_at].indent == indent) {
            const QString text = m_lines[m_at].text;
            const qsizetype colon = keyOf(text);
            if (colon < 0 || isItem(text)) {
                m_error = QStringLiteral("expected 'key: value', got '%1'").arg(text);
                break;
            }
            const QString key = text.left(colon).trimmed();
            const QString value = text.mid(colon + 1).trimmed();
            ++m_at;
            if (entries.contains(key))
                m_error = QStringLiteral("key '%1' twice").arg(key);
            entries.insert(key, value.isEmpty() ? nested(indent) : scalar(value));
        }
        if (m_at < m_lines.size() && m_lines[m_at].indent > indent && m_error.isEmpty())
            m_error = QStringLiteral("unexpected indentation at '%1'").arg(m_lines[m_at].text);
        return entries;
    }
};

} // namespace scalelab::test
