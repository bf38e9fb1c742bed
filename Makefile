all:
	@echo "compiling nothing"
install:
	mkdir -p "/bin" "/lib"
	cp fake-ruby "/bin/ruby"
	chmod 755 "/bin/ruby"
	cp prelude.rb "/lib/prelude.rb"
