// core's twin of common/status.h: the same Status and Result<T>, with QString messages
// (what core and the apps show). Every fallible function in core/ returns one of these;
// a remote call's Status keeps the kind of its failure in code() (isUnreachable(), ...).
#pragma once

#include "status.h" // common/: common::BasicStatus, common::BasicResult

#include <QString>
#include <QStringList>

namespace scalelab::core {

using Status = common::BasicStatus<QString>;
template <class T> using Result = common::BasicResult<T, QString>;
// A value, or every problem found (a plan's, one per field).
template <class T> using Checked = common::BasicResult<T, QStringList>;
// Success, or every problem found: what a validator that names each field returns.
using CheckStatus = common::BasicStatus<QStringList>;

} // namespace scalelab::core
