// Module berth-protogen generates Go code from berth's .proto files without protoc.
// It is separate from berth's module so that its dependencies stay out of go.mod.
module berth.dev/protogen

go 1.26.0

require (
	github.com/bufbuild/protocompile v0.14.1
	google.golang.org/protobuf v1.36.12
)

require golang.org/x/sync v0.8.0 // indirect
