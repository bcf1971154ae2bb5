#include "request_limits.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/reflection.h>

namespace scalelab::agent {

namespace {

using google::protobuf::FieldDescriptor;

std::size_t limitOf(const FieldDescriptor *field)
{
    const std::string &name = field->name();
    if (name == "run_id" || name == "dataset" || name == "name")
        return kMaxName;
    return kMaxString;
}

// Success when `message` (at `prefix`, `depth` messages deep) keeps every limit; else the
// first field that does not, by its path.
common::Status checkLimits(const google::protobuf::Message &message, const std::string &prefix, int depth)
{
    using common::Status;
    if (depth > 16)
        return Status::failure(prefix + ": nested too deeply");
    const auto *reflection = message.GetReflection();
    std::vector<const FieldDescriptor *> fields;
    reflection->ListFields(message, &fields);
    for (const FieldDescriptor *field : fields) {
        const std::string path = prefix.empty() ? field->name() : prefix + "." + field->name();
        if (field->is_repeated()) {
            const int size = reflection->FieldSize(message, field);
            if (size > kMaxRepeated && !field->is_map())
                return Status::failure(path + " has " + std::to_string(size) + " entries; at most "
                    + std::to_string(kMaxRepeated));
            for (int i = 0; i < size && i < kMaxRepeated; ++i) {
                if (field->cpp_type() == FieldDescriptor::CPPTYPE_STRING
                    && field->type() != FieldDescriptor::TYPE_BYTES) {
                    const std::string value = reflection->GetRepeatedString(message, field, i);
                    if (value.size() > kMaxString)
                        return Status::failure(path + "[" + std::to_string(i) + "] is "
                            + std::to_string(value.size()) + " bytes; at most " + std::to_string(kMaxString)
                            + " (it starts with " + shortQuote(value) + ")");
                } else if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
                    if (const Status nested = checkLimits(reflection->GetRepeatedMessage(message, field, i),
                            path + "[" + std::to_string(i) + "]", depth + 1);
                        !nested)
                        return nested;
                }
            }
            continue;
        }
        if (field->cpp_type() == FieldDescriptor::CPPTYPE_STRING
            && field->type() != FieldDescriptor::TYPE_BYTES) {
            const std::string value = reflection->GetString(message, field);
            if (value.size() > limitOf(field))
                return Status::failure(path + " is " + std::to_string(value.size()) + " bytes; at most "
                    + std::to_string(limitOf(field)) + " (it starts with " + shortQuote(value) + ")");
        } else if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
            if (const Status nested = checkLimits(reflection->GetMessage(message, field), path, depth + 1);
                !nested)
                return nested;
        }
    }
    return Status::success();
}

} // namespace

common::Status checkRequestLimits(const google::protobuf::Message &message)
{
    return checkLimits(message, {}, 0);
}

std::string shortQuote(const std::string &value, std::size_t keep)
{
    std::string shown;
    for (unsigned char c : value.substr(0, keep))
        shown += c >= 0x20 && c < 0x7f ? char(c) : '?'; // nothing that breaks a status line
    if (value.size() <= keep)
        return "'" + shown + "'";
    return "'" + shown + "…' (" + std::to_string(value.size()) + " bytes)";
}

} // namespace scalelab::agent
