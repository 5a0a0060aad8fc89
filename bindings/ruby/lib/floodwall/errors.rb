# frozen_string_literal: true

module Floodwall
  # Every exception that floodwall raises is a Floodwall::Error. It is a module, so that bad input can be
  # an ArgumentError as Ruby expects (`rescue ArgumentError` and `rescue Floodwall::Error` both work).
  module Error
    # The C ABI's status code (Floodwall::Native::EINVAL, ...).
    attr_accessor :code

    # The one place where a status code becomes an exception: the native layer (floodwall.i) calls this
    # with the core's message, which names the field ("request_rate.burst: must be ...").
    def self.raise_for_status(code, message)
      error = CLASSES.fetch(code, InternalError).new(message)
      error.code = code
      raise error
    end
  end

  # An unexpected internal error of the core (FW_ERROR).
  class InternalError < StandardError
    include Error
  end

  # A bad argument: a cost above the burst, an unknown limiter or mode, a bad backoff setting (FW_EINVAL).
  class InvalidArgumentError < ArgumentError
    include Error
  end

  # The policy is invalid; the message names the field (FW_EPOLICY).
  class PolicyError < ArgumentError
    include Error
  end

  # The policy's store could not be set up: an unparseable URL, an unknown scheme; or an admin call
  # (Client#admin) could not reach it (FW_ESTORE).
  class StoreError < PolicyError
  end

  # The client was closed (FW_ECLOSED).
  class ClosedError < IOError
    include Error
  end

  # The core ran out of memory (FW_ENOMEM).
  class OutOfMemoryError < NoMemoryError
    include Error
  end

  Error::CLASSES = {
    Native::ERROR => InternalError,
    Native::ENOMEM => OutOfMemoryError,
    Native::EINVAL => InvalidArgumentError,
    Native::EPOLICY => PolicyError,
    Native::ESTORE => StoreError,
    Native::ECLOSED => ClosedError
  }.freeze
end
