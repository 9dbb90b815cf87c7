package config

// Error is a configuration refused: by its checks before anything starts, or
// by the ledger's rules once connected (bidding.deposit). The commands exit 2 for it
// (a usage error), 1 for the other failures.
type Error struct{ Err error }

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Invalid wraps err (nil: nil) as an Error.
func Invalid(err error) error {
	if err == nil {
		return nil
	}
	return &Error{Err: err}
}
