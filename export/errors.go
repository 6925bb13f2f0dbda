package export

// Codes of the validation pack routes.
const (
	CodeNotFound      = "EXPORT_NOT_FOUND"
	CodeNotReady      = "EXPORT_NOT_READY"
	CodeFailed        = "EXPORT_FAILED"
	CodeInvalidFormat = "INVALID_EXPORT_FORMAT"
	CodeInvalidWindow = "INVALID_EXPORT_WINDOW"
)
