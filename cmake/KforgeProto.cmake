# kforge_proto_library(NAME ROOT <dir> PROTOS <files...> SERVICES <files...>)
# Generates C++ (and gRPC stubs for SERVICES) for .proto files under ROOT
# into a static library NAME whose include path is the generated tree.
function(kforge_proto_library name)
  cmake_parse_arguments(ARG "" "ROOT" "PROTOS;SERVICES" ${ARGN})
  set(gen_dir ${CMAKE_CURRENT_BINARY_DIR}/gen)
  file(MAKE_DIRECTORY ${gen_dir})
  get_target_property(protobuf_include protobuf::libprotobuf INTERFACE_INCLUDE_DIRECTORIES)
  set(srcs "")
  foreach(proto IN LISTS ARG_PROTOS)
    string(REGEX REPLACE "\\.proto$" "" stem ${proto})
    set(outs ${gen_dir}/${stem}.pb.cc ${gen_dir}/${stem}.pb.h)
    set(args --cpp_out=${gen_dir})
    if(proto IN_LIST ARG_SERVICES)
      list(APPEND outs ${gen_dir}/${stem}.grpc.pb.cc ${gen_dir}/${stem}.grpc.pb.h)
      list(APPEND args --grpc_out=${gen_dir} --plugin=protoc-gen-grpc=${KFORGE_GRPC_CPP_PLUGIN})
    endif()
    add_custom_command(
      OUTPUT ${outs}
      COMMAND ${KFORGE_PROTOC} ${args} -I ${ARG_ROOT} -I ${protobuf_include} ${proto}
      DEPENDS ${ARG_ROOT}/${proto}
      WORKING_DIRECTORY ${ARG_ROOT}
      COMMENT "protoc ${proto}"
      VERBATIM)
    list(APPEND srcs ${outs})
  endforeach()
  add_library(${name} STATIC ${srcs})
  target_include_directories(${name} SYSTEM PUBLIC ${gen_dir})
  target_link_libraries(${name} PUBLIC protobuf::libprotobuf gRPC::grpc++)
  target_compile_options(${name} PRIVATE -w)
endfunction()
