package manager

import "go.uber.org/zap/zapcore"

// LogTimeEncoder writes a log line's time as RFC 3339 to the millisecond. controller-runtime's default
// stops at the second, and the steps Steward logs (a member restarted, a learner promoted) are seconds long:
// which part took how long is read off the log.
var LogTimeEncoder = zapcore.TimeEncoderOfLayout("2006-01-02T15:04:05.000Z07:00")
