# Runs homebrew/coogle.rb's `test do` block on any machine with Ruby, against an already-built
# coogle, with the few Formula methods the block uses standing in for Homebrew's; and evaluates
# its `service do` block to print what `brew services` would run. tests/distribution.rs drives it:
#
#   ruby brew_formula_harness.rb FORMULA BIN_DIR VERSION
#
# It prints `service <json>` and then `test block passed`, or fails with the block's error.
require "json"
require "pathname"
require "tmpdir"

# The formula's class-level DSL: record what is not needed, keep the two blocks.
class Formula
  class << self
    attr_reader :test_block, :service_block

    def test(&block)
      @test_block = block
    end

    def service(&block)
      @service_block = block
    end

    def method_missing(_name, *_args, **_kwargs, &_block)
      nil
    end

    def respond_to_missing?(_name, _include_private = false)
      true
    end
  end
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

formula, bin_dir, version = ARGV
load formula
klass = Object.const_get(:Coogle)
raise "the formula has no service block" unless klass.service_block
raise "the formula has no test block" unless klass.test_block

bin = Pathname(bin_dir).expand_path
Dir.mktmpdir("brew-test") do |dir|
  testpath = Pathname(dir)
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
