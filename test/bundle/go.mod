module steward.dev/steward/test/bundle

go 1.26.0
