# Runs homebrew/coogle.rb's blocks on any machine with Ruby, with the few Formula methods they
# use standing in for Homebrew's. tests/distribution.rs drives it, one command per run:
#
#   ruby brew_formula_harness.rb FORMULA archives
#       prints `version <v>` and one `archive <json>` line per url/sha256 (os, arch, url, sha256)
#   ruby brew_formula_harness.rb FORMULA install DIR PREFIX
#       runs the install block inside DIR (an unpacked release archive, as `brew install` stages
#       it) into PREFIX, and prints one `installed <path> <mode>` line per file under PREFIX
#   ruby brew_formula_harness.rb FORMULA test BIN_DIR VERSION
#       evaluates the service block (prints `service <json>`) and runs the test block against
#       BIN_DIR, then prints `test block passed`
require "fileutils"
require "json"
require "pathname"
require "tmpdir"

# Homebrew's Pathname#install: move each file into the directory (a Hash renames it).
class Pathname
  def install(*sources)
    mkpath
    sources.each do |src|
      pairs = src.is_a?(Hash) ? src.to_a : [[src, File.basename(src.to_s)]]
      pairs.each do |from, to|
        raise "install: no #{from} in #{Dir.pwd}" unless File.exist?(from.to_s)

        FileUtils.mv(from.to_s, (self / to.to_s).to_s)
      end
    end
  end
end

# The formula's class-level DSL: record the archives (url and sha256 under their on_* blocks)
# and the version, keep the test and service blocks, ignore the rest.
class Formula
  class << self
    attr_reader :test_block, :service_block

    def archives
      @archives ||= []
    end

    def test(&block)
      @test_block = block
    end

    def service(&block)
      @service_block = block
    end

    def version(v = nil)
      @version = v if v
      @version
    end

    def on_macos(&block)
      within(os: "macos", &block)
    end

    def on_linux(&block)
      within(os: "linux", &block)
    end

    def on_intel(&block)
      within(arch: "x86_64", &block)
    end

    def on_arm(&block)
      within(arch: "arm64", &block)
    end

    def url(value, **_opts)
      return if @in_head

      archives << @where.merge("url" => value)
    end

    def sha256(value)
      archives.last["sha256"] = value unless @in_head
    end

    def head(*_args, **_kwargs, &block)
      return unless block

      @in_head = true
      class_eval(&block)
      @in_head = false
    end

    def method_missing(_name, *_args, **_kwargs, &_block)
      nil
    end

    def respond_to_missing?(_name, _include_private = false)
      true
    end

    private

    def within(os: nil, arch: nil)
      saved = @where ||= {}
      @where = saved.merge({ "os" => os, "arch" => arch }.compact)
      yield
      @where = saved
    end
  end

  # What the install block sees: the prefix's directories and Homebrew's build flags.
  Build = Struct.new(:head) do
    def head?
      head
    end
  end

  def initialize(prefix)
    @prefix = Pathname(prefix)
  end

  attr_reader :prefix

  def build = Build.new(false)
  def bin = prefix / "bin"
  def man1 = prefix / "share/man/man1"
  def bash_completion = prefix / "etc/bash_completion.d"
  def zsh_completion = prefix / "share/zsh/site-functions"
  def fish_completion = prefix / "share/fish/vendor_completions.d"
end

# Homebrew's service DSL, recording each setting.
class ServiceSpec
  attr_reader :opt_bin, :var, :settings

  def initialize(opt_bin, var)
    @opt_bin = opt_bin
    @var = var
    @settings = {}
  end

  def std_service_path_env
    "/usr/bin:/bin"
  end

  %i[run keep_alive log_path error_log_path environment_variables working_dir].each do |setting|
    define_method(setting) do |*args, **kwargs|
      @settings[setting] = kwargs.empty? ? (args.length == 1 ? args[0] : args) : kwargs
    end
  end
end

# What a formula's test block sees: bin, testpath, version, and Homebrew's helpers.
class TestContext
  attr_reader :bin, :testpath, :version

  def initialize(bin, testpath, version)
    @bin = bin
    @testpath = testpath
    @version = version
  end

  def shell_output(cmd, result = 0)
    out = `#{cmd}`
    raise "`#{cmd}` exited #{$?.exitstatus}, expected #{result}:\n#{out}" unless $?.exitstatus == result

    out
  end

  def assert_match(expected, actual)
    ok = expected.is_a?(Regexp) ? expected.match?(actual) : actual.include?(expected.to_s)
    raise "expected #{expected.inspect} in:\n#{actual}" unless ok
  end

  # Homebrew passes Pathname arguments through as strings.
  def spawn(*args)
    Process.spawn(*args.map { |a| a.is_a?(Pathname) ? a.to_s : a })
  end

  def system(*args)
    Kernel.system(*args.map { |a| a.is_a?(Pathname) ? a.to_s : a })
  end
end

formula, command, *rest = ARGV
load formula
klass = Object.const_get(:Coogle)

case command
when "archives"
  puts "version #{klass.version}"
  klass.archives.each { |a| puts "archive #{JSON.generate(a)}" }
when "install"
  dir, prefix = rest
  FileUtils.mkdir_p(prefix)
  Dir.chdir(dir) { klass.new(File.expand_path(prefix)).install }
  Dir.glob("**/*", base: prefix).sort.each do |rel|
    path = File.join(prefix, rel)
    puts format("installed %s %o", rel, File.stat(path).mode & 0o7777) if File.file?(path)
  end
when "test"
  bin_dir, version = rest
  raise "the formula has no service block" unless klass.service_block
  raise "the formula has no test block" unless klass.test_block

  bin = Pathname(bin_dir).expand_path
  Dir.mktmpdir("brew-test") do |tmp|
    testpath = Pathname(tmp)
    service = ServiceSpec.new(bin, testpath / "var")
    service.instance_eval(&klass.service_block)
    settings = service.settings.transform_values do |v|
      case v
      when Array then v.map(&:to_s)
      when Hash then v.transform_keys(&:to_s).transform_values { |x| [true, false].include?(x) ? x : x.to_s }
      else v.to_s
      end
    end
    puts "service #{JSON.generate(settings)}"

    # As `brew test` does: HOME is the test directory, and the test runs inside it.
    ENV["HOME"] = testpath.to_s
    Dir.chdir(testpath) do
      TestContext.new(bin, testpath, version).instance_eval(&klass.test_block)
    end
  end
  puts "test block passed"
else
  raise "unknown command #{command.inspect} (archives, install, test)"
end
