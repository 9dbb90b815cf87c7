package auth

import "time"

// SetClock replaces the authenticator's clock (tests).
func (a *Authenticator) SetClock(now func() time.Time) { a.now = now }
