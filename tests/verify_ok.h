// VERIFY_OK(expr): a Qt Test check that a Status or Result (common/status.h, core's
// core_status.h) succeeded, printing why it did not.
#pragma once

#include <QString>
#include <QStringList>
#include <QTest>

#include <string>

namespace scalelab::test {

inline QString errorText(const QString &error)
{
    return error;
}
inline QString errorText(const QStringList &errors)
{
    return errors.join(QLatin1String("; "));
}
inline QString errorText(const std::string &error)
{
    return QString::fromStdString(error);
}

} // namespace scalelab::test

#define VERIFY_OK(expr)                                                                                      \
    do {                                                                                                     \
        const auto &verifyOkResult_ = (expr);                                                                \
        QVERIFY2(verifyOkResult_.ok(), qPrintable(::scalelab::test::errorText(verifyOkResult_.error())));    \
    } while (false)
