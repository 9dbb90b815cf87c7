package app

// ConfigError is a configuration refused: by its checks before anything starts, or
// by the ledger's rules once connected (bidding.deposit). The commands exit 2 for it
// (a usage error), 1 for the other failures.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// Invalid wraps err (nil: nil) as a ConfigError.
func Invalid(err error) error {
	if err == nil {
		return nil
	}
	return &ConfigError{Err: err}
}
