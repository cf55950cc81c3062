# Warnings and sanitizers for ullm's own targets only; never for consumers.
function(ullm_target_warnings target)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wconversion)
    # Option structs are meant to be filled with designated initialisers naming only what
    # differs from the defaults; g++ 12 would warn about every member left out.
    target_compile_options(${target} PRIVATE -Wno-missing-field-initializers)
    if(ULLM_WERROR)
      target_compile_options(${target} PRIVATE -Werror)
    endif()
  endif()
  if(ULLM_SANITIZE)
    target_compile_options(${target} PRIVATE -fsanitize=${ULLM_SANITIZE} -fno-omit-frame-pointer
                                             -fno-sanitize-recover=all)
    target_link_options(${target} PUBLIC -fsanitize=${ULLM_SANITIZE})
  endif()
endfunction()
