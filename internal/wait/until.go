package wait

import (
	"context"
	"errors"
	"time"
)

// abort marks a check's error as final (Abort).
type abort struct{ err error }

func (a abort) Error() string { return a.err.Error() }
func (a abort) Unwrap() error { return a.err }

// Abort makes a check's error end Until (or Retry) at once: what is waited for cannot
// come (a process it needs has exited, a request was refused for good). The check
// must return Abort's error itself, not wrapped. Abort(nil) is nil.
func Abort(err error) error {
	if err == nil {
		return nil
	}
	return abort{err}
}

// Ended is Until's error when ctx ended before the check passed: its message is the
// check's last error (what was still wrong), and errors.Is finds both that error and
// ctx's (context.DeadlineExceeded for a timeout).
type Ended struct {
	Ctx, Last error
}

func (e *Ended) Error() string {
	if e.Last == nil {
		return e.Ctx.Error()
	}
	return e.Last.Error()
}

func (e *Ended) Unwrap() []error {
	if e.Last == nil {
		return []error{e.Ctx}
	}
	return []error{e.Ctx, e.Last}
}

// Until calls check at once and then every `every` (> 0) until it returns nil (Until
// returns nil), returns an error made by Abort (Until returns the error inside), or
// ctx ends (an *Ended with what check last said; a failure that only says ctx ended
// does not replace an earlier one). A wait with a deadline is a ctx with one.
func Until(ctx context.Context, every time.Duration, check func(context.Context) error) error {
	t := time.NewTicker(every)
	defer t.Stop()
	var last error
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		if a, ok := err.(abort); ok { //nolint:errorlint // Abort's error is returned as is
			return a.err
		}
		last = lastOf(ctx, last, err)
		select {
		case <-ctx.Done():
			return &Ended{Ctx: ctx.Err(), Last: last}
		case <-t.C:
		}
	}
}

// Within is Until for at most timeout: nil once check passes; the caller's ctx.Err()
// when ctx ended first (stopped, which is not a time-out); otherwise Until's error (an
// *Ended saying what was still wrong when timeout ran out, or check's Abort).
func Within(ctx context.Context, timeout, every time.Duration, check func(context.Context) error) error {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := Until(wctx, every, check)
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// lastOf is what a wait reports as still wrong after err: err, unless it only says
// that ctx ended and an earlier failure says more.
func lastOf(ctx context.Context, prev, err error) error {
	if prev != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return prev
	}
	return err
}

// Retry calls try until it succeeds (Retry returns nil), fails for good (an error made
// by Abort: Retry returns the error inside), or ctx ends (an *Ended with try's last
// error; a try cut short by ctx is not reported to failed). After each other failure
// it calls failed, to say so, with the error and the pause it then takes: first,
// doubling up to longest.
func Retry(ctx context.Context, first, longest time.Duration, try func(context.Context) error, failed func(err error, pause time.Duration)) error {
	b := Backoff{First: first, Longest: longest}
	var last error
	for {
		err := try(ctx)
		if err == nil {
			return nil
		}
		if a, ok := err.(abort); ok { //nolint:errorlint // Abort's error is returned as is
			return a.err
		}
		last = lastOf(ctx, last, err)
		if ctx.Err() != nil {
			return &Ended{Ctx: ctx.Err(), Last: last}
		}
		pause := b.Next()
		failed(err, pause)
		if !Sleep(ctx, pause) {
			return &Ended{Ctx: ctx.Err(), Last: last}
		}
	}
}
