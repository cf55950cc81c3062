#include <ullm/providers/embedding.hpp>

namespace ullm {

std::string_view to_string(EmbeddingTask task) noexcept {
    switch (task) {
        case EmbeddingTask::retrieval_query:
            return "retrieval_query";
        case EmbeddingTask::retrieval_document:
            return "retrieval_document";
        case EmbeddingTask::semantic_similarity:
            return "semantic_similarity";
        case EmbeddingTask::classification:
            return "classification";
        case EmbeddingTask::clustering:
            return "clustering";
        case EmbeddingTask::question_answering:
            return "question_answering";
        case EmbeddingTask::fact_verification:
            return "fact_verification";
        case EmbeddingTask::code_retrieval_query:
            return "code_retrieval_query";
    }
    return "unknown";
}

}  // namespace ullm
