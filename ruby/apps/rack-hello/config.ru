# rack-hello: the classic "hello, world" Rack app. One route, a static string, no
# framework: the floor against which app servers and frameworks are compared.
body = "Hello, world!\n".freeze
headers = { "content-type" => "text/plain", "content-length" => body.bytesize.to_s }.freeze
run ->(_env) { [200, headers.dup, [body]] }
