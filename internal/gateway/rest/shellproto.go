package rest

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"

	api "berth.dev/berth/api/gateway"
	"berth.dev/berth/internal/deploy"
)

// Shell websocket frame codes, as Akash's provider and tenant tools use them.
const (
	frameStdout  = api.ShellStdout
	frameStderr  = api.ShellStderr
	frameResult  = api.ShellResult
	frameFailure = api.ShellFailure
	frameStdin   = api.ShellStdin
	frameResize  = api.ShellResize
)

// maxShellCommandArgs bounds cmd0…cmdN; maxShellArgBytes their total size.
const (
	maxShellCommandArgs = 256
	maxShellArgBytes    = 64 << 10
)

// shellRequest is a shell route's query: cmd0, cmd1, … (at least one), tty and stdin
// ("1" for yes), service, and podIndex.
type shellRequest struct {
	Command  []string
	TTY      bool
	Stdin    bool
	Service  string
	PodIndex int
}

// parseShellQuery reads a shell request from the query string.
func parseShellQuery(q url.Values) (shellRequest, error) {
	var r shellRequest
	size := 0
	for i := 0; ; i++ {
		v := q.Get("cmd" + strconv.Itoa(i))
		if v == "" {
			break
		}
		if i >= maxShellCommandArgs {
			return r, fmt.Errorf("more than %d command arguments", maxShellCommandArgs)
		}
		size += len(v)
		if size > maxShellArgBytes {
			return r, fmt.Errorf("command longer than %d bytes", maxShellArgBytes)
		}
		r.Command = append(r.Command, v)
	}
	if len(r.Command) == 0 {
		return r, errors.New("no command: give it as cmd0, cmd1, …")
	}
	r.TTY, r.Stdin = q.Get("tty") == "1", q.Get("stdin") == "1"
	r.Service = q.Get("service")
	if r.Service == "" {
		return r, errors.New("service is required")
	}
	idx, err := strconv.ParseUint(q.Get("podIndex"), 0, 31)
	if err != nil {
		return r, fmt.Errorf("podIndex %q: want a number from 0", q.Get("podIndex"))
	}
	r.PodIndex = int(idx)
	return r, nil
}

// clientFrame is one frame a shell client sends: input, or a terminal resize.
type clientFrame struct {
	code   byte
	stdin  []byte
	resize deploy.TerminalSize
}

// parseClientFrame reads a binary message from a shell client. Empty messages are
// ignored (ok false, no error); an unknown code or a malformed resize is an error.
func parseClientFrame(msg []byte) (clientFrame, bool, error) {
	if len(msg) == 0 {
		return clientFrame{}, false, nil
	}
	f := clientFrame{code: msg[0]}
	switch f.code {
	case frameStdin:
		f.stdin = msg[1:]
	case frameResize:
		if len(msg) != 5 {
			return f, false, fmt.Errorf("resize frame of %d bytes: want the code and 4 (width, height as uint16 big-endian)", len(msg))
		}
		f.resize = deploy.TerminalSize{Width: binary.BigEndian.Uint16(msg[1:3]), Height: binary.BigEndian.Uint16(msg[3:5])}
	default:
		return f, false, fmt.Errorf("frame code %d: a client sends %d (stdin) or %d (resize)", f.code, frameStdin, frameResize)
	}
	return f, true, nil
}

// shellResult is the result frame's payload.
type shellResult = api.ShellExit

// resultFrame encodes a result frame (JSON and a newline, as Akash's provider sends).
func resultFrame(r shellResult) []byte {
	b, err := json.Marshal(r)
	if err != nil {
		b = []byte(`{"exit_code":-1}`)
	}
	out := make([]byte, 0, len(b)+2)
	out = append(out, frameResult)
	out = append(out, b...)
	return append(out, '\n')
}
